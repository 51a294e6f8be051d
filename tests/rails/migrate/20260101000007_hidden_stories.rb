# A table created under one name and renamed, with a foreign key dropped
# and added again under the new name.
class HiddenStories < ActiveRecord::Migration[6.1]
  def change
    create_table :hidden_stories do |t|
      t.references :user, null: false, index: false
      t.references :story, null: false
      t.timestamps
    end
    add_index :hidden_stories, [:user_id, :story_id], unique: true
    add_foreign_key :hidden_stories, :users
    rename_table :hidden_stories, :story_hides
    remove_foreign_key :story_hides, :users
    add_foreign_key :story_hides, :users, column: :user_id, on_delete: :cascade
    add_foreign_key :story_hides, :stories
  end
end
