class CreateTagsAndTaggings < ActiveRecord::Migration[6.1]
  def change
    create_table :tags do |t|
      t.string :tag, limit: 25, null: false
      t.string :description, limit: 100
      t.float :hotness_mod, default: 0.0
      t.integer :taggings_count, null: false, default: 0
    end
    add_index :tags, :tag, unique: true
    create_table :taggings do |t|
      t.references :story, null: false, foreign_key: true, index: false
      t.references :tag, null: false, foreign_key: true
      t.index [:story_id, :tag_id], unique: true
    end
  end
end
