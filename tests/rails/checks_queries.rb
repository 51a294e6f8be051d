# Reading: scopes, joins, includes, grouping, batches, JSON and prepared
# statements.

check "query: scopes with order and limit" do
  {
    "hottest" => Story.hottest.limit(2).pluck(:short_id),
    "admins" => User.admins.pluck(:username),
    "offset" => Story.order(:id).offset(1).limit(2).pluck(:short_id),
    "first_last" => [Story.order(:created_at).first.short_id, Story.order(:created_at).last.short_id],
    "exists" => [Story.visible.exists?, Story.where(short_id: "zz").exists?],
    "find_by_sql" => Story.find_by_sql(["SELECT * FROM stories WHERE hotness > ? ORDER BY id", 1]).map(&:short_id)
  }
end

check "query: joins, group, having, order" do
  {
    "commented" => Story.joins(:comments).group("stories.id").having("COUNT(comments.id) >= ?", 1)
                        .order("stories.id").pluck("stories.short_id", Arel.sql("COUNT(comments.id)")),
    "per_user" => Comment.joins(:user).group("users.username").order("users.username").count,
    "left_joins" => User.left_joins(:stories).group(:username).order(:username).count("stories.id"),
    "distinct" => User.joins(:comments).distinct.order(:username).pluck(:username),
    "tag_join" => Story.joins(:tags).where(tags: { tag: "tech" }).order(:short_id).pluck(:short_id),
    "merge" => Story.joins(:user).merge(User.admins).order(:id).pluck(:short_id)
  }
end

check "query: includes, preload, eager_load" do
  includes = Story.includes(:user, :tags).order(:id).map { |s| [s.short_id, s.user.username, s.tags.map(&:tag).sort] }
  eager = Story.eager_load(:comments).where(comments: { upvotes: 0 }).order("stories.id").map { |s| [s.short_id, s.comments.size] }
  preload = User.preload(:stories).order(:id).map { |u| [u.username, u.stories.map(&:short_id).sort] }
  { "includes" => includes, "eager_load" => eager, "preload" => preload }
end

check "query: aggregates over decimals and booleans" do
  {
    "sum" => Story.sum(:hotness), "max" => Story.maximum(:hotness), "min" => Story.minimum(:hotness),
    "avg" => Story.where(is_deleted: false).average(:upvotes),
    "by_deleted" => Story.group(:is_deleted).order(:is_deleted).count,
    "bool_where" => [User.where(is_admin: true).count, User.where(is_admin: false).count],
    "calc_pluck" => Story.where("hotness > ?", BigDecimal("0")).order(:id).pluck(:hotness)
  }
end

check "query: datetime ranges and grouping by date" do
  {
    "range" => Story.where(created_at: T0..(T0 + 90)).order(:id).pluck(:short_id),
    "after" => Comment.where("created_at > ?", T0 + 205).order(:id).pluck(:comment),
    "by_day" => Story.group("DATE(created_at)").count.transform_keys(&:to_s),
    "usec" => Story.where(created_at: T0).pluck(:created_at)
  }
end

check "query: JSON paths" do
  {
    "extract" => User.where("JSON_UNQUOTE(JSON_EXTRACT(settings, '$.theme')) = ?", "dark").pluck(:username),
    "contains" => User.where("JSON_CONTAINS(settings, ?, '$.digest')", "2").pluck(:username),
    "length" => User.where.not(settings: nil).order(:id).pluck(Arel.sql("JSON_LENGTH(settings)")),
    "update" => begin
      u = User.find_by!(username: "bob")
      u.settings = u.settings.merge("theme" => "solarized", "n" => 3)
      u.save!
      User.find(u.id).settings
    end
  }
end

check "query: find_each and in_batches" do
  15.times { |i| Tag.create!(tag: format("bulk%02d", i)) }
  seen = []
  Tag.where("tag LIKE 'bulk%'").find_each(batch_size: 4) { |t| seen << t.tag }
  batches = []
  Tag.in_batches(of: 6) { |rel| batches << rel.count }
  expect(seen.size, 15, "find_each rows")
  { "seen" => seen, "batches" => batches, "find_in_batches" => Tag.find_in_batches(batch_size: 10).map(&:size) }
end

check "query: pluck, pick, ids, where.not, or, none" do
  {
    "pick" => Story.order(:id).pick(:short_id, :upvotes),
    "ids" => Story.visible.order(:id).ids,
    "not" => User.where.not(email: nil).order(:id).pluck(:username),
    "or" => Story.where(short_id: "a1").or(Story.where(upvotes: 0)).order(:id).pluck(:short_id),
    "none" => Story.none.to_a.size,
    "in" => User.where(id: [1, 3, 99]).order(:id).pluck(:username),
    "like" => Story.where("title LIKE ?", "%story%").order(:id).pluck(:short_id),
    "subquery" => User.where(id: Story.visible.select(:user_id)).order(:id).pluck(:username)
  }
end

check "query: uniqueness validation is case-insensitive as the collation" do
  dup = User.new(username: "ALICE")
  { "valid" => dup.valid?, "errors" => dup.errors.full_messages }
end

check "query: prepared statements" do
  config = CONFIG.merge(prepared_statements: true)
  klass = Class.new(ActiveRecord::Base) do
    self.table_name = "stories"
    def self.name = "PreparedStory"
  end
  klass.establish_connection(config)
  begin
    3.times.map { |i| klass.where(id: i + 1).pluck(:short_id, :hotness, :created_at, :is_deleted) }
  ensure
    klass.remove_connection
  end
end
