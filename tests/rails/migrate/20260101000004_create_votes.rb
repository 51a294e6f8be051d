class CreateVotes < ActiveRecord::Migration[6.1]
  def change
    create_table :votes do |t|
      t.references :user, null: false, foreign_key: true, index: false
      t.references :story, null: false, foreign_key: true
      t.bigint :comment_id
      t.integer :vote, limit: 1, null: false
      t.string :reason, limit: 1
      t.timestamps
      t.index [:user_id, :story_id, :comment_id], unique: true
    end
  end
end
