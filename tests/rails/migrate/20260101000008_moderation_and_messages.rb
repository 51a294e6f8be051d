# More of what migrations do: a join table, references added and removed,
# comments, a check constraint, bulk ALTERs, column placement and the
# remaining column types (binary, date, time, float, unsigned).
class ModerationAndMessages < ActiveRecord::Migration[6.1]
  def change
    create_table :messages, comment: "Private messages" do |t|
      t.references :author, null: false, foreign_key: { to_table: :users }
      t.references :recipient, null: false, foreign_key: { to_table: :users }
      t.string :subject, limit: 100, null: false, comment: "What it is about"
      t.binary :body_digest, limit: 32
      t.binary :attachment
      t.date :send_on
      t.time :send_at
      t.float :spam_score
      t.integer :views, unsigned: true, null: false, default: 0
      t.boolean :deleted_by_author, default: false
      t.timestamps
    end
    create_join_table :stories, :users, table_name: :saved_stories do |t|
      t.index [:user_id, :story_id], unique: true
    end
    add_reference :comments, :moderator, foreign_key: { to_table: :users }
    add_reference :stories, :merged_into
    remove_reference :stories, :merged_into
    change_table :users, bulk: true do |t|
      t.string :homepage, limit: 200, after: :email
      t.integer :invitations_left, default: 5, null: false
      t.index :karma
    end
    change_column_comment :users, :karma, from: nil, to: "Sum of votes"
    change_table_comment :stories, from: nil, to: "Submitted links"
    add_check_constraint :messages, "spam_score >= 0", name: "messages_spam_score_nonnegative"
  end
end
