# Writing rows: types, associations, counter caches, locking, upserts,
# transactions and the errors strict mode gives.

T0 = Time.utc(2026, 1, 2, 3, 4, 5, 123_456)

check "create: users with JSON, boolean and datetime(6)" do
  alice = User.create!(username: "alice", email: "alice@example.com", karma: 10, is_admin: true,
                       settings: { "theme" => "dark", "digest" => [1, 2], "nested" => { "a" => nil } },
                       created_at: T0, updated_at: T0)
  bob = User.create!(username: "bob", email: "bob@example.com", settings: { "theme" => "light" },
                     created_at: T0 + 1, updated_at: T0 + 1)
  carol = User.create!(username: "carol", created_at: T0 + 2.5, updated_at: T0 + 2.5)
  expect([alice.id, bob.id, carol.id], [1, 2, 3], "ids")
  back = User.find(alice.id)
  expect(back.settings, alice.settings, "JSON round trip")
  expect(back.created_at, T0, "microseconds kept")
  User.order(:id).map { |u| [u.username, u.is_admin, u.karma, u.settings, u.created_at] }
end

check "create: timestamps set by ActiveRecord" do
  dave = User.create!(username: "dave")
  expect(dave.created_at.is_a?(Time), true, "created_at set")
  reread = User.find(dave.id)
  expect(reread.created_at, dave.created_at, "datetime(6) read back as written")
  before = reread.updated_at
  sleep 0.01
  reread.touch
  expect(User.find(dave.id).updated_at > before, true, "touch moved updated_at")
  { "usec_kept" => reread.created_at.usec == dave.created_at.usec }
end

check "create: stories with decimals and a has_many" do
  alice, bob = User.find_by!(username: "alice"), User.find_by!(username: "bob")
  rows = [
    [alice, "a1", "First story", "https://a.example/1", "12.3456789012", T0],
    [alice, "a2", "Second story", "", "-0.5", T0 + 60],
    [bob, "b1", "Bob's story", "https://b.example/1", "99999.0000000001", T0 + 120],
    [bob, "b2", "Deleted story", "", "3", T0 + 180]
  ]
  rows.each do |user, short_id, title, url, hotness, at|
    user.stories.create!(short_id: short_id, title: title, url: url, hotness: BigDecimal(hotness),
                         markeddown_description: "about #{title}", created_at: at, updated_at: at)
  end
  Story.find_by!(short_id: "b2").update!(is_deleted: true)
  expect(Story.find_by!(short_id: "b1").hotness, BigDecimal("99999.0000000001"), "decimal(20,10)")
  Story.order(:id).map { |s| [s.id, s.user_id, s.short_id, s.hotness, s.is_deleted, s.url] }
end

check "counter cache: stories_count on users" do
  User.order(:id).pluck(:username, :stories_count)
end

check "create: comments with counter caches on stories and users" do
  a1, b1 = Story.find_by!(short_id: "a1"), Story.find_by!(short_id: "b1")
  bob, carol = User.find_by!(username: "bob"), User.find_by!(username: "carol")
  first = a1.comments.create!(user: bob, comment: "Nice", confidence: BigDecimal("0.1234567890123456789"),
                              created_at: T0 + 200, updated_at: T0 + 200)
  a1.comments.create!(user: carol, comment: "Agreed", parent_comment: first, created_at: T0 + 210, updated_at: T0 + 210)
  b1.comments.create!(user: carol, comment: "Hm", created_at: T0 + 220, updated_at: T0 + 220)
  b1.comments.create!(user: bob, comment: "Self-reply", created_at: T0 + 230, updated_at: T0 + 230)
  expect(a1.reload.comments_count, 2, "story counter")
  expect(first.replies.count, 1, "replies")
  {
    "stories" => Story.order(:id).pluck(:short_id, :comments_count),
    "users" => User.order(:id).pluck(:username, :comments_count),
    "confidence" => Comment.find(first.id).confidence
  }
end

check "counter cache: destroy decrements, reset_counters repairs" do
  c = Comment.where(comment: "Self-reply").first
  c.destroy!
  expect(Story.find_by!(short_id: "b1").comments_count, 1, "decremented")
  Story.where(short_id: "b1").update_all(comments_count: 7)
  Story.reset_counters(Story.find_by!(short_id: "b1").id, :comments)
  Story.update_counters(Story.find_by!(short_id: "a1").id, upvotes: 3)
  Story.order(:id).pluck(:short_id, :comments_count, :upvotes)
end

check "has_many through: tags and taggings" do
  tech = Tag.create!(tag: "tech", description: "Technology", hotness_mod: 0.5)
  ask = Tag.create!(tag: "ask")
  Story.find_by!(short_id: "a1").tags << tech
  Story.find_by!(short_id: "a1").tags << ask
  Story.find_by!(short_id: "b1").tags << tech
  expect(tech.reload.taggings_count, 2, "taggings counter")
  {
    "a1" => Story.find_by!(short_id: "a1").tags.order(:tag).pluck(:tag),
    "tech" => tech.stories.order(:short_id).pluck(:short_id),
    "counts" => Tag.order(:tag).pluck(:tag, :taggings_count, :hotness_mod)
  }
end

check "enum and has_many through votes" do
  alice, bob, carol = %w[alice bob carol].map { |n| User.find_by!(username: n) }
  a1, b1 = Story.find_by!(short_id: "a1"), Story.find_by!(short_id: "b1")
  Vote.create!(user: bob, story: a1, vote: :up)
  Vote.create!(user: carol, story: a1, vote: :up)
  Vote.create!(user: alice, story: b1, vote: :down, reason: "S")
  expect(Vote.up.count, 2, "enum scope")
  {
    "bob_voted" => bob.voted_stories.pluck(:short_id),
    "votes" => Vote.order(:id).map { |v| [v.user_id, v.story_id, v.vote, v.reason] },
    "raw" => Vote.order(:id).pluck(Arel.sql("vote"))
  }
end

check "locking: optimistic lock_version" do
  one = User.find_by!(username: "carol")
  two = User.find_by!(username: "carol")
  one.update!(karma: 5)
  error = raises(ActiveRecord::StaleObjectError) { two.update!(karma: 6) }
  two.reload.update!(karma: 7)
  { "error" => error, "row" => User.where(username: "carol").pluck(:karma, :lock_version) }
end

check "locking: pessimistic lock and with_lock" do
  bob = User.find_by!(username: "bob")
  User.transaction do
    locked = User.lock.find(bob.id)
    locked.update!(karma: locked.karma + 1)
  end
  bob.with_lock { bob.update!(karma: bob.karma + 1) }
  User.transaction { User.lock("LOCK IN SHARE MODE").where(id: bob.id).to_a }
  bob.reload.karma
end

check "locking: FOR UPDATE blocks a second connection" do
  bob = User.find_by!(username: "bob")
  order = Queue.new
  holder = Thread.new do
    ActiveRecord::Base.connection_pool.with_connection do
      User.transaction do
        User.lock.find(bob.id)
        order << :locked
        sleep 0.5
        User.where(id: bob.id).update_all("karma = karma + 10")
        order << :released
      end
    end
  end
  expect(order.pop, :locked, "holder")
  waiter = Thread.new do
    ActiveRecord::Base.connection_pool.with_connection do
      User.transaction do
        karma = User.lock.find(bob.id).karma
        order << :waited
        karma
      end
    end
  end
  [holder.value, waiter.value].last.then do |karma|
    events = [order.pop, order.pop]
    expect(events, %i[released waited], "the second locker waited for the commit")
    karma
  end
end

check "upsert: insert_all skips duplicates, upsert_all updates" do
  now = T0 + 1000
  inserted = Tag.insert_all([{ tag: "ask", description: "dup" }, { tag: "meta", description: "Meta" }])
  upserted = User.upsert_all([
    { username: "alice", email: "alice@new.example", karma: 11, created_at: now, updated_at: now },
    { username: "erin", email: "erin@example.com", karma: 1, created_at: now, updated_at: now }
  ])
  Tag.insert_all!([{ tag: "rust" }])
  error = raises(ActiveRecord::RecordNotUnique) { Tag.insert_all!([{ tag: "rust" }]) }
  {
    "insert_rows" => inserted.rows, "upsert_rows" => upserted.rows, "error" => error,
    "tags" => Tag.order(:tag).pluck(:tag, :description),
    "users" => User.order(:username).pluck(:username, :email, :karma)
  }
end

check "transactions: requires_new savepoints" do
  User.transaction do
    User.create!(username: "frank")
    User.transaction(requires_new: true) do
      User.create!(username: "grace")
      raise ActiveRecord::Rollback
    end
    User.transaction(requires_new: true) do
      User.create!(username: "heidi")
      User.transaction(requires_new: true) { User.create!(username: "ivan") }
    end
    begin
      User.transaction(requires_new: true) do
        User.create!(username: "judy")
        User.create!(username: "judy")
      end
    rescue ActiveRecord::RecordInvalid => e
      @invalid = e.class.name
    end
  end
  User.transaction do
    User.create!(username: "mallory")
    raise ActiveRecord::Rollback
  end
  { "users" => User.where(username: %w[frank grace heidi ivan judy mallory]).order(:username).pluck(:username),
    "invalid" => @invalid }
end

check "errors: strict mode and constraints map to ActiveRecord errors" do
  long = raises(ActiveRecord::ValueTooLong) { Story.create!(user_id: 1, short_id: "x" * 7, title: "t", url: "") }
  null = raises(ActiveRecord::NotNullViolation) do
    conn.execute("INSERT INTO tags (tag) VALUES (NULL)")
  end
  unique = raises(ActiveRecord::RecordNotUnique) do
    User.new(username: "alice").save!(validate: false)
  end
  fk = raises(ActiveRecord::InvalidForeignKey) do
    Comment.new(story_id: 999, user_id: 1, comment: "orphan").save!(validate: false)
  end
  range = raises(ActiveRecord::RangeError) { conn.execute("UPDATE users SET karma = 2147483648 WHERE id = 1") }
  fk_delete = raises(ActiveRecord::InvalidForeignKey) { conn.execute("DELETE FROM stories WHERE short_id = 'a1'") }
  [long, null, unique, fk, range, fk_delete]
end

check "update: update_all, increment!, toggle!, delete_all" do
  Story.where(user_id: User.find_by!(username: "alice").id).update_all(["upvotes = upvotes + ?", 2])
  Story.find_by!(short_id: "b1").increment!(:upvotes, 5)
  Story.find_by!(short_id: "b2").toggle!(:is_deleted)
  deleted = Vote.where(vote: :down).delete_all
  { "deleted" => deleted, "stories" => Story.order(:id).pluck(:short_id, :upvotes, :is_deleted) }
end

check "destroy: dependent destroy cascades through associations" do
  erin = User.find_by!(username: "erin")
  s = erin.stories.create!(short_id: "e1", title: "Erin's", url: "https://e.example")
  s.comments.create!(user: erin, comment: "first")
  s.tags << Tag.find_by!(tag: "meta")
  Vote.create!(user: erin, story: s, vote: :up)
  erin.destroy!
  {
    "gone" => [Story.exists?(short_id: "e1"), Comment.exists?(comment: "first"), Vote.exists?(story_id: s.id)],
    "meta_count" => Tag.find_by!(tag: "meta").taggings_count
  }
end
