class CreateStories < ActiveRecord::Migration[6.1]
  def change
    create_table :stories do |t|
      t.references :user, null: false, foreign_key: true
      t.string :short_id, limit: 6, null: false
      t.string :title, limit: 150, null: false
      t.string :url, limit: 250
      t.text :description
      t.decimal :hotness, precision: 20, scale: 10, null: false, default: 0
      t.integer :upvotes, null: false, default: 0
      t.integer :comments_count, null: false, default: 0
      t.boolean :is_deleted, null: false, default: false
      t.timestamps
    end
    add_index :stories, :short_id, unique: true
    add_index :stories, [:is_deleted, :hotness]
  end
end
