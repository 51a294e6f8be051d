class CreateUsers < ActiveRecord::Migration[6.1]
  def change
    create_table :users do |t|
      t.string :username, limit: 50, null: false
      t.string :email, limit: 100
      t.integer :karma, null: false, default: 0
      t.boolean :is_admin, null: false, default: false
      t.json :settings
      t.integer :stories_count, null: false, default: 0
      t.integer :comments_count, null: false, default: 0
      t.integer :lock_version, null: false, default: 0
      t.timestamps
    end
    add_index :users, :username, unique: true
  end
end
