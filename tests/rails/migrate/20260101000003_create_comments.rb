class CreateComments < ActiveRecord::Migration[6.1]
  def change
    create_table :comments do |t|
      t.references :story, null: false, foreign_key: true
      t.references :user, null: false, foreign_key: true
      t.bigint :parent_comment_id
      t.text :comment, null: false
      t.integer :upvotes, null: false, default: 0
      t.decimal :confidence, precision: 20, scale: 19, null: false, default: 0
      t.timestamps
    end
    add_index :comments, :parent_comment_id
  end
end
