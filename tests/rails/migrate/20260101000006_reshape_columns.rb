# The schema changes an application makes after launch: a column grows, one
# is renamed, one dropped, indexes added and renamed.
class ReshapeColumns < ActiveRecord::Migration[6.1]
  def up
    change_column :stories, :upvotes, :bigint, null: false, default: 0
    change_column :users, :email, :string, limit: 255
    rename_column :stories, :description, :markeddown_description
    add_column :stories, :merged_story_id, :bigint
    add_column :users, :about, :text
    remove_column :users, :about
    add_index :comments, [:story_id, :created_at], name: "comments_by_story"
    rename_index :comments, "comments_by_story", "index_comments_on_story_id_and_created_at"
    change_column_default :tags, :hotness_mod, from: 0.0, to: 0.25
    change_column_null :stories, :url, false, ""
  end

  def down
    change_column_null :stories, :url, true
    change_column_default :tags, :hotness_mod, from: 0.25, to: 0.0
    remove_index :comments, name: "index_comments_on_story_id_and_created_at"
    remove_column :stories, :merged_story_id
    rename_column :stories, :markeddown_description, :description
    change_column :users, :email, :string, limit: 100
    change_column :stories, :upvotes, :integer, null: false, default: 0
  end
end
