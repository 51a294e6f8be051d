# Forms Rails applications use every day that the checks above do not:
# 4-byte UTF-8, joined UPDATE/DELETE, polymorphic and STI models, touch,
# serialized columns, nested attributes.

check "utf8mb4: emoji and accents round trip and compare" do
  u = User.create!(username: "zoë 🚀", email: "zoe@example.com")
  back = User.find(u.id)
  expect(back.username, "zoë 🚀", "4-byte characters")
  {
    "like" => User.where("username LIKE ?", "%🚀%").pluck(:username),
    "ci" => User.where(username: "ZOË 🚀").count,
    "length" => User.where(id: u.id).pluck(Arel.sql("CHAR_LENGTH(username)"), Arel.sql("LENGTH(username)"))
  }
end

check "update_all and delete_all through joins" do
  updated = Story.joins(:user).where(users: { username: "alice" }).update_all("stories.upvotes = stories.upvotes + 100")
  Vote.create!(user: User.find_by!(username: "carol"), story: Story.find_by!(short_id: "b1"), vote: :up)
  deleted = Vote.joins(:story).where(stories: { short_id: "b1" }).delete_all
  {
    "updated" => updated, "deleted" => deleted,
    "upvotes" => Story.order(:id).pluck(:short_id, :upvotes),
    "votes" => Vote.joins(:story).order(:id).pluck("stories.short_id")
  }
end

check "touch: true and belongs_to touching the parent" do
  story = Story.find_by!(short_id: "a1")
  before = story.updated_at
  story.touch(time: T0 + 5000)
  story.comments.order(:id).first.touch(time: T0 + 6000)
  { "story" => Story.find(story.id).updated_at, "changed" => Story.find(story.id).updated_at != before }
end

check "long text and large blob" do
  text = "é" * 20_000 + "🚀" * 1000
  s = Story.find_by!(short_id: "a2")
  s.update!(markeddown_description: text)
  blob = BYTES * 250
  m = Message.first
  m.update!(attachment: blob)
  expect(Story.find(s.id).markeddown_description, text, "text")
  expect(Message.find(m.id).attachment.bytesize, blob.bytesize, "blob size")
  expect(Message.find(m.id).attachment == blob, true, "blob bytes")
  [text.length, blob.bytesize]
end

check "in_batches with update_all and pluck over batches" do
  Tag.where("tag LIKE 'bulk%'").in_batches(of: 5) { |batch| batch.update_all(taggings_count: 1) }
  Tag.where("tag LIKE 'bulk%'").order(:tag).pluck(:tag, :taggings_count)
end

check "query: order by association columns and nulls" do
  {
    "by_user" => Story.joins(:user).order("users.username DESC", :id).pluck(:short_id),
    "nulls" => User.order(Arel.sql("email IS NULL, email")).pluck(:username),
    "limit_offset_count" => Story.limit(2).offset(1).count,
    "group_multi" => Comment.group(:story_id, :user_id).order(:story_id, :user_id).count.to_a,
    "having_sum" => Story.group(:user_id).having("SUM(upvotes) > ?", 10).order(:user_id).sum(:upvotes)
  }
end

check "query: subqueries ActiveRecord builds" do
  {
    "exists" => User.where(Story.where("stories.user_id = users.id").arel.exists).order(:id).pluck(:username),
    "not_in" => User.where.not(id: Comment.select(:user_id)).order(:id).pluck(:username),
    "scalar" => Story.order(:id).pluck(Arel.sql("(SELECT COUNT(*) FROM votes WHERE votes.story_id = stories.id)")),
    "in_group" => Story.where(id: Comment.group(:story_id).having("COUNT(*) > 1").select(:story_id)).pluck(:short_id)
  }
end

check "transactions: after_commit callbacks and rollback restores state" do
  tag = Tag.create!(tag: "txn")
  Tag.transaction do
    tag.update!(description: "inside")
    raise ActiveRecord::Rollback
  end
  { "reloaded" => tag.reload.description, "exists" => Tag.exists?(tag: "txn") }
end

check "migrate: FULLTEXT index and MATCH ... AGAINST" do
  conn.add_index :stories, [:title, :markeddown_description], type: :fulltext, name: "stories_fulltext"
  begin
    {
      "indexes" => conn.indexes(:stories).select { |i| i.type == :fulltext }.map { |i| [i.name, i.columns] },
      "boolean" => Story.where("MATCH(title, markeddown_description) AGAINST (? IN BOOLEAN MODE)", "+story -second")
                        .order(:id).pluck(:short_id)
    }
  ensure
    conn.remove_index :stories, name: "stories_fulltext" if conn.index_name_exists?(:stories, "stories_fulltext")
  end
end

check "prepared statements: writes and reads with typed binds" do
  klass = Class.new(ActiveRecord::Base) do
    self.table_name = "users"
    attribute :settings, :json
    def self.name = "PreparedUser"
  end
  klass.establish_connection(CONFIG.merge(prepared_statements: true))
  begin
    at = T0 + 7777.654321
    u = klass.create!(username: "prep", email: nil, karma: -3, is_admin: true, settings: { "k" => [1, "two"] },
                      created_at: at, updated_at: at)
    u.update!(karma: 4, email: "p@example.com")
    {
      "row" => klass.where(id: u.id).pluck(:username, :email, :karma, :is_admin, :settings, :created_at),
      "by_time" => klass.where(created_at: at).pluck(:username),
      "by_bool" => klass.where(is_admin: true, username: "prep").count,
      "by_range" => klass.where(karma: 0..5, username: "prep").count,
      "hotness" => Story.connection_pool == klass.connection_pool ? nil : klass.connection.select_all(
        klass.sanitize_sql(["SELECT short_id FROM stories WHERE hotness > ? ORDER BY id", BigDecimal("12.3")])
      ).rows
    }
  ensure
    klass.remove_connection
  end
end

check "affected rows: ActiveRecord counts matched rows (FOUND_ROWS)" do
  title = Story.find_by!(short_id: "a1").title
  {
    "same_value" => Story.where(short_id: "a1").update_all(title: title),
    "changed" => Story.where(short_id: %w[a1 b1]).update_all(["upvotes = upvotes + ?", 1]),
    "none" => Story.where(short_id: "nope").update_all(upvotes: 0)
  }
end

check "connection: verify!, reconnect!, disconnect! and a new connection" do
  conn.verify!
  conn.reconnect!
  ActiveRecord::Base.connection_pool.disconnect!
  { "active" => conn.active?, "count" => Story.count, "mode" => conn.select_value("SELECT @@SESSION.sql_mode").include?("STRICT_ALL_TABLES") }
end
