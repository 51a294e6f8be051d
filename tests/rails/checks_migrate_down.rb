# The schema dump, then the migrations down and up again.

def schema_dump
  io = StringIO.new
  ActiveRecord::SchemaDumper.dump(conn, io)
  io.string.lines.reject { |l| l.start_with?("#") || l.strip.empty? }.join
end

check "schema: dump" do
  dump = schema_dump
  expect(dump.include?('create_table "story_hides"'), true, "renamed table dumped")
  expect(dump.include?('add_foreign_key "story_hides", "users", on_delete: :cascade'), true, "foreign key dumped")
  dump.lines.map(&:rstrip)
end

check "schema: load the dump into a second database" do
  dump = schema_dump
  conn.recreate_database("rails_checks_copy", charset: "utf8mb4")
  ActiveRecord::Base.establish_connection(CONFIG.merge(database: "rails_checks_copy"))
  begin
    eval(dump, TOPLEVEL_BINDING) # rubocop:disable Security/Eval -- what `rails db:schema:load` does
    expect(schema_dump, dump, "the copy's dump")
    conn.tables.sort
  ensure
    ActiveRecord::Base.establish_connection(CONFIG)
  end
end

check "migrate: down two versions" do
  migration_context.migrate(20260101000005)
  expect(migration_context.current_version, 20260101000005, "version")
  {
    "tables" => conn.tables.sort,
    "stories" => conn.columns("stories").map { |c| [c.name, c.sql_type] },
    "users_email" => conn.columns("users").find { |c| c.name == "email" }.sql_type,
    "rows" => Story.order(:id).pluck(:short_id)
  }
end

check "migrate: up again and the same dump" do
  first = nil
  migration_context.migrate
  first = schema_dump
  migration_context.rollback(2)
  migration_context.migrate
  expect(schema_dump, first, "dump after a second round trip")
  migration_context.current_version
end

check "migrate: down to zero" do
  Vote.delete_all
  migration_context.migrate(0)
  expect(migration_context.current_version, 0, "version")
  conn.tables.sort
end
