//! Generates the Lobsters data set (seeded, Zipf-skewed) and loads it with
//! multi-row INSERTs, reporting progress on stderr.

use super::schema::{self, hotness, TABLES};
use super::Variant;
use crate::db::sql_str;
use crate::dist::Zipf;
use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::io::Write;
use std::time::Instant;

/// Epoch seconds of the first primed story (2017-07-14).
pub const EPOCH_START: i64 = 1_500_000_000;
/// Primed stories are spread over one year after `EPOCH_START`.
pub const PRIMED_SPAN_SECS: i64 = 365 * 86_400;
/// Zipf exponent of story popularity (votes, comments, views).
pub const STORY_ZIPF_S: f64 = 0.6;
/// Zipf exponent of user activity (heavy voters also comment and read more).
pub const USER_ZIPF_S: f64 = 0.7;
/// Zipf exponent of tag popularity.
pub const TAG_ZIPF_S: f64 = 1.0;

/// Row counts for one scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizes {
    pub users: u64,
    pub stories: u64,
    pub comments: u64,
    pub tags: u64,
    /// Votes beyond each item's self-upvote.
    pub story_votes: u64,
    pub comment_votes: u64,
}

impl Sizes {
    /// At scale 1.0: 6,000 users, 40,000 stories, 120,000 comments.
    pub fn for_scale(scale: f64) -> Sizes {
        let n = |base: f64, min: u64| ((base * scale).round() as u64).max(min);
        let stories = n(40_000.0, 20);
        let comments = n(120_000.0, 60);
        Sizes {
            users: n(6_000.0, 10),
            stories,
            comments,
            tags: if scale >= 0.05 { 100 } else { 20 },
            story_votes: 2 * stories,
            comment_votes: comments,
        }
    }
}

/// A bijection of `1..=n` used to scatter popularity ranks over ids, so the
/// most popular story is not simply the newest.
#[derive(Debug, Clone, Copy)]
pub struct Scatter {
    n: u64,
    mul: u64,
}

impl Scatter {
    /// A scatter over `1..=n` (n > 0).
    pub fn new(n: u64) -> Scatter {
        const PRIMES: [u64; 4] = [2_654_435_761, 1_000_003, 999_983, 7919];
        let mul = PRIMES
            .iter()
            .copied()
            .find(|&p| n.checked_rem(p) != Some(0))
            .unwrap_or(1);
        Scatter { n, mul }
    }

    /// Maps rank `1..=n` to a distinct position `1..=n`.
    pub fn map(&self, rank: u64) -> u64 {
        ((rank - 1) as u128 * self.mul as u128 % self.n as u128) as u64 + 1
    }
}

/// Lower-case base-36 rendering used for primed short ids.
pub fn base36(mut v: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if v == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    while v > 0 {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) for epoch seconds.
pub fn datetime(ts: i64) -> String {
    let days = ts.div_euclid(86_400);
    let secs = ts.rem_euclid(86_400);
    // Civil-from-days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

const WORDS: &[&str] = &[
    "rust", "database", "lobsters", "dataflow", "kernel", "compiler", "release", "security",
    "haskell", "design", "latency", "postgres", "mysql", "unix", "editor", "network", "privacy",
    "parser", "memory", "cache", "async", "types", "review", "history", "linux", "emacs", "vim",
    "browser",
];

/// `n` words drawn at random, space separated.
pub fn words<R: Rng + ?Sized>(rng: &mut R, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
    }
    s
}

struct Story {
    user_id: u64,
    created_ts: i64,
    upvotes: i64,
    downvotes: i64,
    comments: i64,
}

struct Comment {
    story_id: u64,
    user_id: u64,
    parent: Option<u64>,
    thread: Option<u64>,
    created_ts: i64,
    upvotes: i64,
    downvotes: i64,
}

/// Drops and recreates every Lobsters table for `variant` and loads the
/// data set for `scale`, generated from `seed`.
pub async fn prime(conn: &mut Conn, variant: Variant, scale: f64, seed: u64) -> Result<()> {
    let sizes = Sizes::for_scale(scale);
    for t in TABLES.iter().rev() {
        conn.query_drop(format!("DROP TABLE IF EXISTS {t}")).await?;
    }
    for ddl in schema::create_statements(variant) {
        conn.query_drop(&ddl)
            .await
            .with_context(|| format!("creating table: {}", ddl.lines().next().unwrap_or("")))?;
    }

    let mut rng = StdRng::seed_from_u64(seed);
    let user_zipf = Zipf::new(sizes.users, USER_ZIPF_S).context("user count")?;
    let story_zipf = Zipf::new(sizes.stories, STORY_ZIPF_S).context("story count")?;
    let tag_zipf = Zipf::new(sizes.tags, TAG_ZIPF_S).context("tag count")?;
    let story_scatter = Scatter::new(sizes.stories);
    let user = |rng: &mut StdRng| user_zipf.sample(rng);

    // Stories, oldest first, each with its author's self-upvote.
    let gap = PRIMED_SPAN_SECS / sizes.stories as i64;
    let mut stories: Vec<Story> = (1..=sizes.stories)
        .map(|i| Story {
            user_id: user(&mut rng),
            created_ts: EPOCH_START + i as i64 * gap,
            upvotes: 1,
            downvotes: 0,
            comments: 0,
        })
        .collect();
    // (user, story, comment, vote)
    let mut votes: Vec<(u64, u64, Option<u64>, i8)> = Vec::with_capacity(
        (sizes.stories + sizes.comments + sizes.story_votes + sizes.comment_votes) as usize,
    );
    for (i, s) in stories.iter().enumerate() {
        votes.push((s.user_id, i as u64 + 1, None, 1));
    }

    // Comments on popular stories; half reply to an earlier comment.
    let mut per_story: Vec<Vec<u64>> = vec![Vec::new(); sizes.stories as usize];
    let mut comments: Vec<Comment> = Vec::with_capacity(sizes.comments as usize);
    for cid in 1..=sizes.comments {
        let story_id = story_scatter.map(story_zipf.sample(&mut rng));
        let siblings = &mut per_story[story_id as usize - 1];
        let (parent, thread) = if !siblings.is_empty() && rng.gen_bool(0.5) {
            let p = siblings[rng.gen_range(0..siblings.len())];
            let pc = &comments[p as usize - 1];
            (Some(p), Some(pc.thread.unwrap_or(p)))
        } else {
            (None, None)
        };
        siblings.push(cid);
        let story = &mut stories[story_id as usize - 1];
        story.comments += 1;
        let user_id = user(&mut rng);
        votes.push((user_id, story_id, Some(cid), 1));
        comments.push(Comment {
            story_id,
            user_id,
            parent,
            thread,
            created_ts: story.created_ts + rng.gen_range(60..2 * 86_400),
            upvotes: 1,
            downvotes: 0,
        });
    }

    // Extra votes: heavy users vote on popular items; one vote per pair.
    let mut seen: HashSet<(u64, u64, Option<u64>)> =
        votes.iter().map(|v| (v.0, v.1, v.2)).collect();
    let comment_zipf = Zipf::new(sizes.comments, STORY_ZIPF_S).context("comment count")?;
    let comment_scatter = Scatter::new(sizes.comments);
    let mut attempts = 0u64;
    let mut added = 0u64;
    while added < sizes.story_votes && attempts < sizes.story_votes * 4 {
        attempts += 1;
        let u = user(&mut rng);
        let sid = story_scatter.map(story_zipf.sample(&mut rng));
        if !seen.insert((u, sid, None)) {
            continue;
        }
        let v: i8 = if rng.gen_bool(0.05) { -1 } else { 1 };
        let s = &mut stories[sid as usize - 1];
        if v > 0 {
            s.upvotes += 1
        } else {
            s.downvotes += 1
        }
        votes.push((u, sid, None, v));
        added += 1;
    }
    attempts = 0;
    added = 0;
    while added < sizes.comment_votes && attempts < sizes.comment_votes * 4 {
        attempts += 1;
        let u = user(&mut rng);
        let cid = comment_scatter.map(comment_zipf.sample(&mut rng));
        let c = &mut comments[cid as usize - 1];
        if !seen.insert((u, c.story_id, Some(cid))) {
            continue;
        }
        let v: i8 = if rng.gen_bool(0.05) { -1 } else { 1 };
        if v > 0 {
            c.upvotes += 1
        } else {
            c.downvotes += 1
        }
        votes.push((u, c.story_id, Some(cid), v));
        added += 1;
    }

    // Karma = net votes on a user's stories and comments.
    let mut karma = vec![0i64; sizes.users as usize + 1];
    for s in &stories {
        karma[s.user_id as usize] += s.upvotes - s.downvotes;
    }
    for c in &comments {
        karma[c.user_id as usize] += c.upvotes - c.downvotes;
    }

    // Small tables.
    let n_hats = (sizes.users / 50).max(1);
    let n_messages = sizes.users * 2;
    let n_hidden = (sizes.stories / 10).max(1);
    let n_saved = (sizes.stories / 10).max(1);
    let n_ribbons = (sizes.stories / 2).max(1);
    let mut unread = vec![0i64; sizes.users as usize + 1];

    let total_rows = sizes.users
        + sizes.tags
        + sizes.stories * 3
        + sizes.comments
        + votes.len() as u64
        + n_hats
        + n_messages
        + n_hidden
        + n_saved
        + n_ribbons
        + if variant == Variant::Original {
            sizes.users
        } else {
            0
        };
    let mut loader = Loader::new(total_rows);
    let orig = variant == Variant::Original;

    // users
    let cols = if orig {
        "id, username, email, password_digest, created_at, session_token, about, rss_token, karma"
    } else {
        "id, username, email, password_digest, created_at, session_token, about, rss_token"
    };
    let mut batch = Batch::new("users", cols);
    for id in 1..=sizes.users {
        let mut row = format!(
            "{id}, 'user{id}', 'user{id}@example.com', 'digest{id}', '{}', 'sess{id}', {}, 'rss{id}'",
            datetime(EPOCH_START - 86_400 + id as i64),
            sql_str(&words(&mut rng, 8)),
        );
        if orig {
            row.push_str(&format!(", {}", karma[id as usize]));
        }
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // tags
    let mut batch = Batch::new(
        "tags",
        "id, tag, description, is_media, inactive, hotness_mod",
    );
    for id in 1..=sizes.tags {
        let row = format!(
            "{id}, 'tag{id}', {}, {}, {}, 0",
            sql_str(&words(&mut rng, 3)),
            i32::from(id % 10 == 0),
            i32::from(id % 37 == 0)
        );
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // stories
    let cols = if orig {
        "id, created_at, created_ts, user_id, url, title, description, short_id, markeddown_description, upvotes, downvotes, hotness, comments_count"
    } else {
        "id, created_at, created_ts, user_id, url, title, description, short_id, markeddown_description"
    };
    let mut batch = Batch::new("stories", cols);
    for (i, s) in stories.iter().enumerate() {
        let id = i as u64 + 1;
        let desc = words(&mut rng, 12);
        let mut row = format!(
            "{id}, '{}', {}, {}, 'https://example.com/{id}', {}, {}, '{}', {}",
            datetime(s.created_ts),
            s.created_ts,
            s.user_id,
            sql_str(&words(&mut rng, 6)),
            sql_str(&desc),
            base36(id),
            sql_str(&format!("<p>{desc}</p>")),
        );
        if orig {
            row.push_str(&format!(
                ", {}, {}, {}, {}",
                s.upvotes,
                s.downvotes,
                hotness(s.upvotes - s.downvotes, s.created_ts),
                s.comments
            ));
        }
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // taggings: one to three distinct tags per story
    let mut batch = Batch::new("taggings", "story_id, tag_id");
    for id in 1..=sizes.stories {
        let mut tags: Vec<u64> = (0..rng.gen_range(1..=3))
            .map(|_| tag_zipf.sample(&mut rng))
            .collect();
        tags.sort_unstable();
        tags.dedup();
        for t in tags {
            batch.push(conn, &mut loader, format!("{id}, {t}")).await?;
        }
    }
    batch.flush(conn, &mut loader).await?;

    // comments
    let cols = if orig {
        "id, created_at, updated_at, short_id, story_id, user_id, parent_comment_id, thread_id, comment, markeddown_comment, upvotes, downvotes, confidence"
    } else {
        "id, created_at, updated_at, short_id, story_id, user_id, parent_comment_id, thread_id, comment, markeddown_comment"
    };
    let mut batch = Batch::new("comments", cols);
    let opt = |v: Option<u64>| v.map_or("NULL".to_owned(), |v| v.to_string());
    for (i, c) in comments.iter().enumerate() {
        let id = i as u64 + 1;
        let body = words(&mut rng, 15);
        let at = datetime(c.created_ts);
        let mut row = format!(
            "{id}, '{at}', '{at}', '{}', {}, {}, {}, {}, {}, {}",
            base36(id),
            c.story_id,
            c.user_id,
            opt(c.parent),
            opt(c.thread),
            sql_str(&body),
            sql_str(&format!("<p>{body}</p>")),
        );
        if orig {
            row.push_str(&format!(
                ", {}, {}, {}",
                c.upvotes,
                c.downvotes,
                c.upvotes - c.downvotes
            ));
        }
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // votes
    let mut batch = Batch::new("votes", "user_id, story_id, comment_id, vote");
    for (u, s, c, v) in &votes {
        batch
            .push(conn, &mut loader, format!("{u}, {s}, {}, {v}", opt(*c)))
            .await?;
    }
    batch.flush(conn, &mut loader).await?;

    // hats
    let mut batch = Batch::new(
        "hats",
        "created_at, updated_at, granted_by_user_id, user_id, hat, link",
    );
    for i in 1..=n_hats {
        let u = user(&mut rng);
        let at = datetime(EPOCH_START + i as i64);
        let row = format!("'{at}', '{at}', 1, {u}, 'Hat {i}', 'https://example.com/hat/{i}'");
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // messages; about one in five unread
    let mut batch = Batch::new(
        "messages",
        "created_at, author_user_id, recipient_user_id, has_been_read, subject, body, short_id",
    );
    for i in 1..=n_messages {
        let from = user(&mut rng);
        let to = rng.gen_range(1..=sizes.users);
        let read = !rng.gen_bool(0.2);
        if !read {
            unread[to as usize] += 1;
        }
        let row = format!(
            "'{}', {from}, {to}, {}, {}, {}, 'm{}'",
            datetime(EPOCH_START + i as i64 * 60),
            i32::from(read),
            sql_str(&words(&mut rng, 4)),
            sql_str(&words(&mut rng, 20)),
            base36(i),
        );
        batch.push(conn, &mut loader, row).await?;
    }
    batch.flush(conn, &mut loader).await?;

    // keystores: the app caches unread message counts (original only)
    if orig {
        let mut batch = Batch::new("keystores", "`key`, value");
        for u in 1..=sizes.users {
            batch
                .push(
                    conn,
                    &mut loader,
                    format!("'user:{u}:unread_messages', {}", unread[u as usize]),
                )
                .await?;
        }
        batch.flush(conn, &mut loader).await?;
    }

    // hidden, saved, read ribbons
    for (table, n) in [
        ("hidden_stories", n_hidden),
        ("saved_stories", n_saved),
        ("read_ribbons", n_ribbons),
    ] {
        let cols = match table {
            "hidden_stories" => "user_id, story_id",
            "saved_stories" => "created_at, updated_at, user_id, story_id",
            _ => "is_following, created_at, updated_at, user_id, story_id",
        };
        let mut batch = Batch::new(table, cols);
        let mut pairs = HashSet::new();
        for i in 0..n {
            let u = user(&mut rng);
            let s = story_scatter.map(story_zipf.sample(&mut rng));
            if !pairs.insert((u, s)) {
                loader.add(1);
                continue;
            }
            let at = datetime(EPOCH_START + PRIMED_SPAN_SECS + i as i64);
            let row = match table {
                "hidden_stories" => format!("{u}, {s}"),
                "saved_stories" => format!("'{at}', '{at}', {u}, {s}"),
                _ => format!("1, '{at}', '{at}', {u}, {s}"),
            };
            batch.push(conn, &mut loader, row).await?;
        }
        batch.flush(conn, &mut loader).await?;
    }
    loader.finish();
    Ok(())
}

/// Rows per multi-row INSERT.
const BATCH_ROWS: usize = 500;

struct Batch {
    prefix: String,
    rows: Vec<String>,
}

impl Batch {
    fn new(table: &str, cols: &str) -> Batch {
        Batch {
            prefix: format!("INSERT INTO {table} ({cols}) VALUES "),
            rows: Vec::with_capacity(BATCH_ROWS),
        }
    }

    async fn push(&mut self, conn: &mut Conn, loader: &mut Loader, row: String) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() >= BATCH_ROWS {
            self.flush(conn, loader).await?;
        }
        Ok(())
    }

    async fn flush(&mut self, conn: &mut Conn, loader: &mut Loader) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut sql = self.prefix.clone();
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            sql.push_str(r);
            sql.push(')');
        }
        conn.query_drop(&sql)
            .await
            .with_context(|| format!("loading: {}...", &self.prefix))?;
        loader.add(self.rows.len() as u64);
        self.rows.clear();
        Ok(())
    }
}

/// Progress line on stderr: percent and rows loaded.
struct Loader {
    total: u64,
    done: u64,
    start: Instant,
    last_print: Instant,
}

impl Loader {
    fn new(total: u64) -> Loader {
        let now = Instant::now();
        Loader {
            total: total.max(1),
            done: 0,
            start: now,
            last_print: now,
        }
    }

    fn add(&mut self, rows: u64) {
        self.done += rows;
        if self.last_print.elapsed().as_millis() >= 500 {
            self.print();
            self.last_print = Instant::now();
        }
    }

    fn print(&self) {
        let pct = (self.done as f64 / self.total as f64 * 100.0).min(100.0);
        let secs = self.start.elapsed().as_secs_f64();
        eprint!(
            "\rpriming: {pct:5.1}% ({} / ~{} rows, {:.0} rows/s)   ",
            self.done,
            self.total,
            self.done as f64 / secs.max(0.001)
        );
        let _ = std::io::stderr().flush();
    }

    fn finish(&self) {
        self.print();
        eprintln!(
            "\npriming: done in {:.1}s",
            self.start.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        assert_eq!(datetime(0), "1970-01-01 00:00:00");
        assert_eq!(datetime(1_500_000_000), "2017-07-14 02:40:00");
        assert_eq!(datetime(951_782_400), "2000-02-29 00:00:00");
        let s = Scatter::new(1000);
        let mut seen: Vec<u64> = (1..=1000).map(|r| s.map(r)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (1..=1000).collect::<Vec<_>>());
        let one = Sizes::for_scale(1.0);
        assert_eq!(
            (one.users, one.stories, one.comments),
            (6_000, 40_000, 120_000)
        );
        assert!(Sizes::for_scale(0.0001).stories >= 20);
    }
}
