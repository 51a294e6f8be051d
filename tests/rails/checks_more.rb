# Less common but ordinary: binary and temporal types, has_and_belongs_to_many,
# find_or_create_by, EXPLAIN, MySQL functions in scopes, locking options.

BYTES = (0..255).map(&:chr).join.b

check "types: binary with every byte, date, time, float, unsigned" do
  alice, bob = User.find_by!(username: "alice"), User.find_by!(username: "bob")
  m = Message.create!(author: alice, recipient: bob, subject: "Hi", body_digest: BYTES[0, 32],
                      attachment: BYTES * 4, send_on: Date.new(2026, 2, 28), send_at: "13:14:15",
                      spam_score: 0.125, views: 4_000_000_000)
  back = Message.find(m.id)
  expect(back.attachment, BYTES * 4, "blob bytes")
  expect(back.body_digest, BYTES[0, 32], "varbinary bytes")
  {
    "date" => back.send_on, "time" => back.send_at.strftime("%H:%M:%S"), "float" => back.spam_score,
    "unsigned" => back.views, "by_blob" => Message.where(body_digest: BYTES[0, 32]).count,
    "sent" => alice.sent_messages.pluck(:subject)
  }
end

check "types: check constraint and unsigned range" do
  checked = raises(ActiveRecord::StatementInvalid) { Message.first.update_column(:spam_score, -1) }
  range = raises(ActiveRecord::RangeError) { conn.execute("UPDATE messages SET views = 4294967296") }
  { "check" => checked, "range" => range, "row" => Message.pluck(:views, :spam_score) }
end

check "habtm: saved stories through a join table" do
  alice = User.find_by!(username: "alice")
  alice.saved_stories << Story.find_by!(short_id: "b1")
  alice.saved_stories << Story.find_by!(short_id: "a1")
  {
    "saved" => alice.saved_stories.order(:short_id).pluck(:short_id),
    "count" => alice.saved_stories.count,
    "join_rows" => conn.select_rows("SELECT story_id, user_id FROM saved_stories ORDER BY story_id")
  }
end

check "find_or_create_by, create_or_find_by, upsert one row" do
  a = Tag.find_or_create_by!(tag: "ruby") { |t| t.description = "Ruby" }
  b = Tag.find_or_create_by!(tag: "ruby")
  c = Tag.create_or_find_by!(tag: "ruby")
  Tag.upsert({ tag: "go", description: "Go" })
  Tag.upsert({ tag: "go", description: "Golang" })
  expect([a.id, b.id, c.id].uniq.size, 1, "one row")
  Tag.where(tag: %w[ruby go]).order(:tag).pluck(:tag, :description)
end

check "store_accessor over the JSON column" do
  carol = User.find_by!(username: "carol")
  carol.update!(theme: "contrast")
  User.find(carol.id).settings
end

check "update_columns, destroy_by, delete_by, touch: false" do
  s = Story.find_by!(short_id: "a2")
  s.update_columns(title: "Second story, edited", upvotes: 42)
  Tag.destroy_by(tag: "bulk00")
  Tag.delete_by(tag: "bulk01")
  { "story" => Story.where(id: s.id).pluck(:title, :upvotes), "bulk" => Tag.where("tag LIKE 'bulk%'").count }
end

check "query: MySQL functions and operators in scopes" do
  {
    "field" => Story.order(Arel.sql("FIELD(short_id, 'b1', 'a2', 'a1', 'b2')")).pluck(:short_id),
    "regexp" => Story.where("title REGEXP ?", "^(First|Bob)").order(:id).pluck(:short_id),
    "date_format" => Story.order(:id).pluck(Arel.sql("DATE_FORMAT(created_at, '%Y-%m-%d %H:%i')")),
    "concat" => User.where(id: [1, 2]).order(:id).pluck(Arel.sql("CONCAT(username, '#', id)")),
    "if" => Story.order(:id).pluck(Arel.sql("IF(is_deleted, 'gone', 'live')")),
    "ifnull" => User.order(:id).limit(3).pluck(Arel.sql("IFNULL(email, '-')")),
    "count_distinct" => Comment.distinct.count(:user_id),
    "sum_group" => Story.group(:user_id).order(:user_id).sum(:upvotes),
    "case" => Story.order(:id).pluck(Arel.sql("CASE WHEN upvotes > 3 THEN 'hot' ELSE 'cold' END"))
  }
end

check "query: where.missing, from a subquery, select with aliases" do
  {
    "missing" => Story.where.missing(:comments).order(:id).pluck(:short_id),
    "from" => Story.from(Story.visible.select(:id, :user_id), :stories).order(:id).pluck(:id),
    "alias" => Story.select("stories.id, COUNT(comments.id) AS n").left_joins(:comments)
                    .group("stories.id").order("stories.id").map { |s| [s.id, s.n] },
    "annotate" => Story.annotate("hot stories").visible.order(:id).pluck(:short_id),
    "hints" => Story.optimizer_hints("MAX_EXECUTION_TIME(1000)").order(:id).pluck(:short_id)
  }
end

check "query: explain" do
  plan = Story.where(short_id: "a1").explain
  plan.is_a?(String) && plan.start_with?("EXPLAIN for:")
end

check "locking: NOWAIT and SKIP LOCKED" do
  bob = User.find_by!(username: "bob")
  User.transaction do
    User.lock("FOR UPDATE NOWAIT").find(bob.id)
    User.lock("FOR UPDATE SKIP LOCKED").where(id: bob.id).to_a.size
  end
end

check "transactions: isolation levels" do
  levels = %i[read_committed repeatable_read serializable].map do |level|
    User.transaction(isolation: level) do
      conn.select_value("SELECT @@tx_isolation")
    end
  end
  levels
end

check "connection: select_all, select_rows, exec_query with binds" do
  {
    "rows" => conn.select_rows("SELECT username, karma FROM users WHERE id <= 2 ORDER BY id"),
    "all" => conn.select_all("SELECT COUNT(*) AS n FROM stories").to_a,
    "binds" => conn.exec_query("SELECT username FROM users WHERE id = 1").rows,
    "quote" => conn.select_value("SELECT #{conn.quote("it's \\ \"quoted\"")}")
  }
end

check "schema: comments and check constraints reflected" do
  {
    "table_comment" => conn.table_comment("stories"),
    "message_comment" => conn.table_comment("messages"),
    "column_comment" => conn.columns("users").find { |c| c.name == "karma" }.comment,
    "checks" => conn.check_constraints("messages").map { |c| [c.name, c.expression] },
    "users_columns" => conn.columns("users").map(&:name)
  }
end
