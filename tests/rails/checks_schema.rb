# Connecting, creating the database, migrating up and reading the schema back.

check "connect: a fresh database with the default settings" do
  ActiveRecord::Base.establish_connection(CONFIG.merge(database: nil))
  conn.recreate_database(DATABASE, charset: "utf8mb4")
  ActiveRecord::Base.establish_connection(CONFIG)
  mode = conn.select_value("SELECT @@SESSION.sql_mode")
  expect(mode.split(",").include?("STRICT_ALL_TABLES"), true, "strict sql_mode")
  {
    "one" => conn.select_value("SELECT 1"),
    "database" => conn.current_database,
    "charset" => conn.charset,
    "auto_is_null" => conn.select_value("SELECT @@SESSION.sql_auto_is_null").to_i
  }
end

check "connect: advisory lock" do
  got = conn.get_advisory_lock("rails-checks")
  other = ActiveRecord::Base.connection_pool.checkout
  elsewhere = other.get_advisory_lock("rails-checks")
  ActiveRecord::Base.connection_pool.checkin(other)
  released = conn.release_advisory_lock("rails-checks")
  expect([got, elsewhere, released], [true, false, true], "lock, lock elsewhere, release")
end

check "migrate: up to the latest version" do
  migration_context.migrate
  expect(migration_context.current_version, LATEST, "current version")
  { "versions" => migration_context.get_all_versions, "tables" => conn.tables.sort }
end

check "migrate: needs_migration? and schema_migrations" do
  expect(migration_context.needs_migration?, false, "needs_migration?")
  expect(conn.table_exists?(:ar_internal_metadata), true, "ar_internal_metadata")
  ActiveRecord::InternalMetadata[:environment]
end

check "reflect: columns of users and stories" do
  %w[users stories].to_h do |table|
    [table, conn.columns(table).map { |c| [c.name, c.sql_type, c.null, c.default] }]
  end
end

check "reflect: indexes" do
  %w[users stories comments votes taggings story_hides].to_h do |table|
    [table, conn.indexes(table).map { |i| [i.name, i.columns, i.unique] }.sort]
  end
end

check "reflect: foreign keys" do
  %w[stories comments votes taggings story_hides].to_h do |table|
    [table, conn.foreign_keys(table).map { |f| [f.to_table, f.column, f.primary_key, f.on_delete] }.sort_by(&:to_s)]
  end
end

check "reflect: primary keys, data sources, views" do
  expect(conn.primary_key("users"), "id", "primary key")
  expect(conn.data_source_exists?("stories"), true, "data source")
  expect(conn.table_exists?("hidden_stories"), false, "renamed table gone")
  conn.execute("CREATE VIEW visible_stories AS SELECT id, title FROM stories WHERE is_deleted = 0")
  views = conn.views
  conn.execute("DROP VIEW visible_stories")
  { "data_sources" => conn.data_sources.sort, "views" => views }
end

check "reflect: model attribute types" do
  [User, Story, Comment, Vote, Tag].to_h do |model|
    model.reset_column_information
    [model.name, model.attribute_types.transform_values(&:type).sort.to_h]
  end
end
