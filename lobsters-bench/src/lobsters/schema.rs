//! The Lobsters schema (the tables of the 2018 app's `db/schema.rb`, MySQL
//! flavour), in two variants: `original` keeps the app's denormalized
//! counters; `natural` drops them and leaves counting to the queries.
//!
//! One addition to the app's schema: `stories.created_ts` (epoch seconds of
//! `created_at`, immutable) so that hotness is plain integer arithmetic in
//! both variants instead of a time-zone-dependent date function.

use super::Variant;

/// Hotness weight of one vote of score, in seconds (an upvote is worth this
/// much recency). Hotness = -(score * HOTNESS_VOTE_SECS + created_ts);
/// smaller is hotter, as in the app.
pub const HOTNESS_VOTE_SECS: i64 = 3600;

/// The app's hotness for a story with `score` = upvotes - downvotes.
pub fn hotness(score: i64, created_ts: i64) -> i64 {
    -(score * HOTNESS_VOTE_SECS + created_ts)
}

/// Every table, in creation order (drop in reverse).
pub const TABLES: &[&str] = &[
    "users",
    "stories",
    "comments",
    "votes",
    "tags",
    "taggings",
    "hidden_stories",
    "saved_stories",
    "read_ribbons",
    "hats",
    "hat_requests",
    "messages",
    "keystores",
    "invitations",
    "invitation_requests",
    "moderations",
    "suggested_titles",
    "suggested_taggings",
    "tag_filters",
];

/// `CREATE TABLE` statements for `variant`.
pub fn create_statements(variant: Variant) -> Vec<String> {
    let orig = variant == Variant::Original;
    let c = |original_only: &str| {
        if orig {
            original_only.to_owned()
        } else {
            String::new()
        }
    };
    vec![
        format!(
            "CREATE TABLE users (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  username VARCHAR(50) NOT NULL,
  email VARCHAR(100),
  password_digest VARCHAR(75),
  created_at DATETIME,
  is_admin TINYINT NOT NULL DEFAULT 0,
  password_reset_token VARCHAR(75),
  session_token VARCHAR(75) NOT NULL DEFAULT '',
  about TEXT,
  invited_by_user_id INT,
  is_moderator TINYINT NOT NULL DEFAULT 0,
  pushover_mentions TINYINT NOT NULL DEFAULT 0,
  rss_token VARCHAR(75),
  mailing_list_token VARCHAR(75),
  mailing_list_mode INT DEFAULT 0,
  {karma}deleted_at DATETIME,
  banned_at DATETIME,
  banned_by_user_id INT,
  banned_reason VARCHAR(200),
  disabled_invite_at DATETIME,
  disabled_invite_by_user_id INT,
  disabled_invite_reason VARCHAR(200),
  settings TEXT,
  UNIQUE KEY username (username),
  KEY session_token (session_token)
)",
            karma = c("karma INT NOT NULL DEFAULT 0,\n  ")
        ),
        format!(
            "CREATE TABLE stories (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME,
  created_ts BIGINT NOT NULL,
  user_id INT NOT NULL,
  url VARCHAR(250) DEFAULT '',
  title VARCHAR(150) NOT NULL DEFAULT '',
  description TEXT,
  short_id VARCHAR(10) NOT NULL DEFAULT '',
  is_expired TINYINT NOT NULL DEFAULT 0,
  {counters}is_moderated TINYINT NOT NULL DEFAULT 0,
  markeddown_description TEXT,
  story_cache TEXT,
  merged_story_id INT,
  unavailable_at DATETIME,
  twitter_id VARCHAR(20),
  user_is_author TINYINT DEFAULT 0,
  UNIQUE KEY unique_short_id (short_id),
  KEY user_id (user_id),
  KEY created_at (created_at),
  {hotness_key}KEY merged_story_id (merged_story_id)
)",
            counters = c("upvotes INT NOT NULL DEFAULT 0,\n  downvotes INT NOT NULL DEFAULT 0,\n  hotness BIGINT NOT NULL DEFAULT 0,\n  comments_count INT NOT NULL DEFAULT 0,\n  "),
            hotness_key = c("KEY hotness_idx (hotness),\n  ")
        ),
        format!(
            "CREATE TABLE comments (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME NOT NULL,
  updated_at DATETIME,
  short_id VARCHAR(10) NOT NULL DEFAULT '',
  story_id INT NOT NULL,
  user_id INT NOT NULL,
  parent_comment_id INT,
  thread_id INT,
  comment TEXT NOT NULL,
  {counters}markeddown_comment TEXT,
  is_deleted TINYINT NOT NULL DEFAULT 0,
  is_moderated TINYINT NOT NULL DEFAULT 0,
  is_from_email TINYINT NOT NULL DEFAULT 0,
  hat_id INT,
  UNIQUE KEY short_id (short_id),
  KEY story_id_short_id (story_id, short_id),
  KEY thread_id (thread_id),
  KEY user_id (user_id)
)",
            counters = c("upvotes INT NOT NULL DEFAULT 0,\n  downvotes INT NOT NULL DEFAULT 0,\n  confidence BIGINT NOT NULL DEFAULT 0,\n  ")
        ),
        "CREATE TABLE votes (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  user_id INT NOT NULL,
  story_id INT NOT NULL,
  comment_id INT,
  vote TINYINT NOT NULL,
  reason CHAR(1),
  KEY user_id_comment_id (user_id, comment_id),
  KEY user_id_story_id (user_id, story_id),
  KEY story_id (story_id),
  KEY comment_id (comment_id)
)"
        .into(),
        "CREATE TABLE tags (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tag VARCHAR(25) NOT NULL DEFAULT '',
  description VARCHAR(100),
  privileged TINYINT NOT NULL DEFAULT 0,
  is_media TINYINT NOT NULL DEFAULT 0,
  inactive TINYINT NOT NULL DEFAULT 0,
  hotness_mod FLOAT DEFAULT 0,
  UNIQUE KEY tag (tag)
)"
        .into(),
        "CREATE TABLE taggings (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  story_id INT NOT NULL,
  tag_id INT NOT NULL,
  UNIQUE KEY story_id_tag_id (story_id, tag_id),
  KEY tag_id (tag_id)
)"
        .into(),
        "CREATE TABLE hidden_stories (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  user_id INT,
  story_id INT,
  UNIQUE KEY user_id_story_id (user_id, story_id),
  KEY story_id (story_id)
)"
        .into(),
        "CREATE TABLE saved_stories (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  user_id INT,
  story_id INT,
  UNIQUE KEY user_id_story_id (user_id, story_id)
)"
        .into(),
        "CREATE TABLE read_ribbons (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  is_following TINYINT DEFAULT 1,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  user_id INT,
  story_id INT,
  KEY user_id_story_id (user_id, story_id),
  KEY story_id (story_id)
)"
        .into(),
        "CREATE TABLE hats (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME,
  updated_at DATETIME,
  granted_by_user_id INT,
  user_id INT,
  hat VARCHAR(255) NOT NULL,
  link VARCHAR(255),
  modlog_use TINYINT DEFAULT 0,
  doffed_at DATETIME,
  KEY user_id (user_id)
)"
        .into(),
        "CREATE TABLE hat_requests (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME,
  updated_at DATETIME,
  user_id INT,
  hat VARCHAR(255) NOT NULL,
  link VARCHAR(255) NOT NULL,
  comment TEXT NOT NULL
)"
        .into(),
        "CREATE TABLE messages (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME,
  author_user_id INT,
  recipient_user_id INT,
  has_been_read TINYINT DEFAULT 0,
  subject VARCHAR(100),
  body TEXT,
  short_id VARCHAR(30),
  deleted_by_author TINYINT DEFAULT 0,
  deleted_by_recipient TINYINT DEFAULT 0,
  UNIQUE KEY random_hash (short_id),
  KEY recipient_user_id (recipient_user_id)
)"
        .into(),
        "CREATE TABLE keystores (
  `key` VARCHAR(50) NOT NULL PRIMARY KEY,
  value BIGINT
)"
        .into(),
        "CREATE TABLE invitations (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  user_id INT,
  email VARCHAR(255),
  code VARCHAR(255),
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  memo TEXT,
  used_at DATETIME,
  new_user_id INT
)"
        .into(),
        "CREATE TABLE invitation_requests (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  code VARCHAR(255),
  is_verified TINYINT DEFAULT 0,
  email VARCHAR(255),
  name VARCHAR(255),
  memo TEXT,
  ip_address VARCHAR(255),
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL
)"
        .into(),
        "CREATE TABLE moderations (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  moderator_user_id INT,
  story_id INT,
  comment_id INT,
  user_id INT,
  action TEXT,
  reason TEXT,
  is_from_suggestions TINYINT DEFAULT 0,
  KEY created_at (created_at)
)"
        .into(),
        "CREATE TABLE suggested_titles (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  story_id INT,
  user_id INT,
  title VARCHAR(150) NOT NULL DEFAULT ''
)"
        .into(),
        "CREATE TABLE suggested_taggings (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  story_id INT,
  tag_id INT,
  user_id INT
)"
        .into(),
        "CREATE TABLE tag_filters (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  user_id INT,
  tag_id INT,
  KEY user_tag_idx (user_id, tag_id)
)"
        .into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_schema_has_no_counters() {
        let orig = create_statements(Variant::Original).join("\n");
        let nat = create_statements(Variant::Natural).join("\n");
        for col in [
            "karma INT",
            "upvotes INT",
            "hotness BIGINT",
            "comments_count",
            "confidence",
        ] {
            assert!(orig.contains(col), "{col}");
            assert!(!nat.contains(col), "{col}");
        }
        assert_eq!(create_statements(Variant::Natural).len(), TABLES.len());
        assert!(hotness(2, 100) < hotness(1, 100));
        assert!(hotness(0, 200) < hotness(0, 100));
    }
}
