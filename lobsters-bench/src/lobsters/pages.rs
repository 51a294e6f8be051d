//! The Lobsters pages: which queries each issues, in both query variants.
//!
//! Every page is a sequence of prepared statements (`exec` with
//! parameters), modelled on what the 2018 Lobsters app issues for it. A page
//! can also record a canonical rendering of what it read (`Trace`), which
//! must be identical for the `original` and `natural` variants.

use super::prime::{base36, datetime, Scatter, STORY_ZIPF_S, USER_ZIPF_S};
use super::schema::HOTNESS_VOTE_SECS;
use super::Variant;
use crate::db::{get_i64, i64_or0, opt_i64, placeholders, text};
use crate::dist::{Weighted, Zipf};
use anyhow::{anyhow, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use rand::Rng;
use serde::Serialize;

/// One kind of page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Page {
    Story,
    Frontpage,
    User,
    Comments,
    Recent,
    CommentUpvote,
    StoryUpvote,
    NewComment,
    Login,
    Reply,
    CommentDownvote,
    Submit,
    StoryDownvote,
    Logout,
}

impl Page {
    /// Every page, in mix order.
    pub const ALL: [Page; 14] = [
        Page::Story,
        Page::Frontpage,
        Page::User,
        Page::Comments,
        Page::Recent,
        Page::CommentUpvote,
        Page::StoryUpvote,
        Page::NewComment,
        Page::Login,
        Page::Reply,
        Page::CommentDownvote,
        Page::Submit,
        Page::StoryDownvote,
        Page::Logout,
    ];

    /// Requests of this page per 100,000 (lobste.rs production, 2018).
    pub fn weight(self) -> u64 {
        match self {
            Page::Story => 55_842,
            Page::Frontpage => 30_105,
            Page::User => 6_702,
            Page::Comments => 4_674,
            Page::Recent => 967,
            Page::CommentUpvote => 630,
            Page::StoryUpvote => 475,
            Page::NewComment => 316,
            Page::Login => 87,
            Page::Reply => 71,
            Page::CommentDownvote => 54,
            Page::Submit => 53,
            Page::StoryDownvote => 21,
            // The rest of 100,000.
            Page::Logout => 3,
        }
    }

    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Page::Story => "story",
            Page::Frontpage => "frontpage",
            Page::User => "user",
            Page::Comments => "comments",
            Page::Recent => "recent",
            Page::CommentUpvote => "comment_upvote",
            Page::StoryUpvote => "story_upvote",
            Page::NewComment => "new_comment",
            Page::Login => "login",
            Page::Reply => "reply",
            Page::CommentDownvote => "comment_downvote",
            Page::Submit => "submit",
            Page::StoryDownvote => "story_downvote",
            Page::Logout => "logout",
        }
    }

    /// Whether the page writes.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Page::CommentUpvote
                | Page::StoryUpvote
                | Page::NewComment
                | Page::Reply
                | Page::CommentDownvote
                | Page::Submit
                | Page::StoryDownvote
                | Page::Login
        )
    }

    /// Whether the page needs a logged-in user.
    fn needs_user(self) -> bool {
        self.writes() || self == Page::Logout
    }
}

/// The production page mix.
pub fn page_mix() -> Weighted<Page> {
    let pairs: Vec<(Page, u64)> = Page::ALL.iter().map(|&p| (p, p.weight())).collect();
    // The weights are constants adding up to 100,000.
    Weighted::new(&pairs).expect("page weights are positive")
}

/// What the harness knows about the database: the stories and comments it
/// can address by short id, and the number of users and tags.
#[derive(Debug, Clone)]
pub struct World {
    /// (id, short_id) of every story, by id.
    pub stories: Vec<(i64, String)>,
    /// (short_id, story index into `stories`) of every comment, by id.
    pub comments: Vec<(String, usize)>,
    pub users: i64,
    pub tags: i64,
    story_zipf: Zipf,
    story_scatter: Scatter,
    comment_zipf: Zipf,
    comment_scatter: Scatter,
    user_zipf: Zipf,
}

impl World {
    /// Reads the addressable stories and comments from the database.
    pub async fn load(conn: &mut Conn) -> Result<World> {
        let stories: Vec<(i64, String)> = conn
            .query_map(
                "SELECT id, short_id FROM stories ORDER BY id",
                |(id, s): (i64, String)| (id, s),
            )
            .await?;
        let index: std::collections::HashMap<i64, usize> =
            stories.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
        let raw: Vec<(String, i64)> = conn
            .query("SELECT short_id, story_id FROM comments ORDER BY id")
            .await?;
        let comments = raw
            .into_iter()
            .filter_map(|(s, story)| index.get(&story).map(|&i| (s, i)))
            .collect();
        let users: Option<i64> = conn.query_first("SELECT MAX(id) FROM users").await?;
        let tags: Option<i64> = conn.query_first("SELECT MAX(id) FROM tags").await?;
        World::new(stories, comments, users.unwrap_or(0), tags.unwrap_or(0))
    }

    /// A world from known contents (at least one story, comment, user, tag).
    pub fn new(
        stories: Vec<(i64, String)>,
        comments: Vec<(String, usize)>,
        users: i64,
        tags: i64,
    ) -> Result<World> {
        let empty = || anyhow!("the database holds no Lobsters data: run with --prime first");
        let ns = stories.len() as u64;
        let nc = comments.len() as u64;
        Ok(World {
            story_zipf: Zipf::new(ns, STORY_ZIPF_S).ok_or_else(empty)?,
            story_scatter: Scatter::new(ns.max(1)),
            comment_zipf: Zipf::new(nc, STORY_ZIPF_S).ok_or_else(empty)?,
            comment_scatter: Scatter::new(nc.max(1)),
            user_zipf: Zipf::new(u64::try_from(users).unwrap_or(0), USER_ZIPF_S)
                .ok_or_else(empty)?,
            stories,
            comments,
            users,
            tags: tags.max(1),
        })
    }

    fn story<R: Rng>(&self, rng: &mut R) -> usize {
        self.story_scatter.map(self.story_zipf.sample(rng)) as usize - 1
    }

    fn comment<R: Rng>(&self, rng: &mut R) -> usize {
        self.comment_scatter.map(self.comment_zipf.sample(rng)) as usize - 1
    }

    fn user<R: Rng>(&self, rng: &mut R) -> i64 {
        self.user_zipf.sample(rng) as i64
    }

    /// A fully specified request: every random choice is made here, so
    /// the same seed replays the same requests against any database.
    pub fn request<R: Rng>(
        &self,
        rng: &mut R,
        page: Page,
        logged_in_fraction: f64,
        now_ts: i64,
    ) -> Request {
        let viewer = if page.needs_user() || rng.gen_bool(logged_in_fraction.clamp(0.0, 1.0)) {
            Some(self.user(rng))
        } else {
            None
        };
        let story = self.story(rng);
        let comment = self.comment(rng);
        // Six characters, so never equal to a primed (base-36 id) short id.
        let new_short_id: String = (0..6)
            .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.gen_range(0..36)]))
            .collect();
        Request {
            page,
            viewer,
            story,
            comment,
            target_user: self.user(rng),
            tag: rng.gen_range(1..=self.tags),
            new_short_id: format!("z{new_short_id}"),
            title_seed: rng.gen(),
            now_ts,
        }
    }
}

/// One page request with its random choices already made.
#[derive(Debug, Clone)]
pub struct Request {
    pub page: Page,
    /// The logged-in user, if any.
    pub viewer: Option<i64>,
    /// Index into `World::stories`.
    pub story: usize,
    /// Index into `World::comments`.
    pub comment: usize,
    /// The user whose profile is shown, or who logs in.
    pub target_user: i64,
    pub tag: i64,
    /// Short id for a submitted story or new comment.
    pub new_short_id: String,
    pub title_seed: u64,
    /// Wall-clock time of the request, epoch seconds.
    pub now_ts: i64,
}

/// Canonical rendering of what a page read, for comparing variants.
#[derive(Debug, Default)]
pub struct Trace(Option<Vec<String>>);

impl Trace {
    /// Records nothing (load runs).
    pub fn off() -> Trace {
        Trace(None)
    }

    /// Records lines (checks).
    pub fn on() -> Trace {
        Trace(Some(Vec::new()))
    }

    fn line(&mut self, f: impl FnOnce() -> String) {
        if let Some(v) = &mut self.0 {
            v.push(f());
        }
    }

    /// Records several lines in a canonical (sorted) order.
    fn sorted(&mut self, tag: &str, mut lines: Vec<String>) {
        if let Some(v) = &mut self.0 {
            lines.sort();
            v.push(format!("{tag}: {}", lines.join(" | ")));
        }
    }

    /// The recorded lines.
    pub fn lines(self) -> Vec<String> {
        self.0.unwrap_or_default()
    }
}

macro_rules! params {
    ($($v:expr),* $(,)?) => { vec![$(Value::from($v)),*] };
}

async fn rows(conn: &mut Conn, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
    conn.exec(sql, params)
        .await
        .with_context(|| format!("query failed: {sql}"))
}

async fn run(conn: &mut Conn, sql: &str, params: Vec<Value>) -> Result<()> {
    conn.exec_drop(sql, params)
        .await
        .with_context(|| format!("statement failed: {sql}"))
}

async fn insert(conn: &mut Conn, sql: &str, params: Vec<Value>) -> Result<i64> {
    run(conn, sql, params).await?;
    let id = conn
        .last_insert_id()
        .ok_or_else(|| anyhow!("no insert id after: {sql}"))?;
    Ok(i64::try_from(id)?)
}

/// Net votes per story (natural variant): a derived table of vote counts.
const STORY_VOTES: &str =
    "(SELECT story_id, COUNT(*) AS votes, SUM(vote) AS score FROM votes WHERE comment_id IS NULL GROUP BY story_id)";
/// Comments per story (natural variant).
const STORY_COMMENTS: &str = "(SELECT story_id, COUNT(*) AS n FROM comments GROUP BY story_id)";
/// Net votes per comment (natural variant).
const COMMENT_VOTES: &str =
    "(SELECT comment_id, COUNT(*) AS votes, SUM(vote) AS score FROM votes WHERE comment_id IS NOT NULL GROUP BY comment_id)";

/// Columns of a story listing: id, user_id, title, short_id, created_ts,
/// then counters: (upvotes, downvotes, comments_count) in `original`,
/// (votes, score, comments) in `natural`.
fn story_select(v: Variant) -> String {
    match v {
        Variant::Original => "SELECT s.id, s.user_id, s.title, s.short_id, s.created_ts, s.upvotes, s.downvotes, s.comments_count FROM stories s".into(),
        Variant::Natural => format!(
            "SELECT s.id, s.user_id, s.title, s.short_id, s.created_ts, COALESCE(v.votes, 0), COALESCE(v.score, 0), COALESCE(cc.n, 0) \
             FROM stories s LEFT JOIN {STORY_VOTES} v ON v.story_id = s.id LEFT JOIN {STORY_COMMENTS} cc ON cc.story_id = s.id"
        ),
    }
}

/// Story listing filter (not merged, not expired, non-negative score) and
/// order, as the front page and /recent use them.
fn story_list_sql(v: Variant, hottest: bool) -> String {
    let (score, hot) = match v {
        Variant::Original => ("s.upvotes - s.downvotes", "s.hotness ASC".to_owned()),
        Variant::Natural => (
            "COALESCE(v.score, 0)",
            format!("COALESCE(v.score, 0) * {HOTNESS_VOTE_SECS} + s.created_ts DESC"),
        ),
    };
    let order = if hottest {
        format!("{hot}, s.id ASC")
    } else {
        "s.id DESC".into()
    };
    format!(
        "{} WHERE s.merged_story_id IS NULL AND s.is_expired = 0 AND {score} >= 0 ORDER BY {order} LIMIT 51",
        story_select(v)
    )
}

/// A story row with its vote counts, whichever variant read it.
#[derive(Debug, Clone)]
struct StoryRow {
    id: i64,
    user_id: i64,
    title: String,
    short_id: String,
    created_ts: i64,
    upvotes: i64,
    downvotes: i64,
    comments: i64,
}

impl StoryRow {
    fn parse(v: Variant, r: &Row) -> Result<StoryRow> {
        let (a, b) = (i64_or0(r, 5)?, i64_or0(r, 6)?);
        let (upvotes, downvotes) = match v {
            Variant::Original => (a, b),
            // (votes + score) / 2 up, (votes - score) / 2 down.
            Variant::Natural => ((a + b) / 2, (a - b) / 2),
        };
        Ok(StoryRow {
            id: get_i64(r, 0)?,
            user_id: get_i64(r, 1)?,
            title: text(r, 2)?,
            short_id: text(r, 3)?,
            created_ts: get_i64(r, 4)?,
            upvotes,
            downvotes,
            comments: i64_or0(r, 7)?,
        })
    }

    fn render(&self) -> String {
        format!(
            "story {} {} by {} '{}' t={} +{} -{} c={}",
            self.id,
            self.short_id,
            self.user_id,
            self.title,
            self.created_ts,
            self.upvotes,
            self.downvotes,
            self.comments
        )
    }
}

/// Comment columns: id, user_id, story_id, parent_comment_id, short_id,
/// then (upvotes, downvotes) or (votes, score).
fn comment_select(v: Variant) -> String {
    match v {
        Variant::Original => "SELECT c.id, c.user_id, c.story_id, c.parent_comment_id, c.short_id, c.upvotes, c.downvotes FROM comments c".into(),
        Variant::Natural => format!(
            "SELECT c.id, c.user_id, c.story_id, c.parent_comment_id, c.short_id, COALESCE(v.votes, 0), COALESCE(v.score, 0) \
             FROM comments c LEFT JOIN {COMMENT_VOTES} v ON v.comment_id = c.id"
        ),
    }
}

fn render_comment(v: Variant, r: &Row) -> Result<(i64, i64, String)> {
    let (a, b) = (i64_or0(r, 5)?, i64_or0(r, 6)?);
    let (up, down) = match v {
        Variant::Original => (a, b),
        Variant::Natural => ((a + b) / 2, (a - b) / 2),
    };
    let id = get_i64(r, 0)?;
    let story = get_i64(r, 2)?;
    let line = format!(
        "comment {id} {} by {} on {story} parent={} +{up} -{down}",
        text(r, 4)?,
        get_i64(r, 1)?,
        text(r, 3)?
    );
    Ok((get_i64(r, 1)?, story, line))
}

/// Executes one request and records what it read into `trace`.
pub async fn execute(
    conn: &mut Conn,
    v: Variant,
    world: &World,
    req: &Request,
    trace: &mut Trace,
) -> Result<()> {
    if let Some(uid) = req.viewer {
        session(conn, v, uid, trace).await?;
    }
    match req.page {
        Page::Story => story_page(conn, v, world, req, trace).await,
        Page::Frontpage => story_list(conn, v, req, trace, true).await,
        Page::Recent => story_list(conn, v, req, trace, false).await,
        Page::User => user_page(conn, v, req, trace).await,
        Page::Comments => comments_page(conn, v, req, trace).await,
        Page::StoryUpvote => story_vote(conn, v, world, req, trace, 1).await,
        Page::StoryDownvote => story_vote(conn, v, world, req, trace, -1).await,
        Page::CommentUpvote => comment_vote(conn, v, world, req, trace, 1).await,
        Page::CommentDownvote => comment_vote(conn, v, world, req, trace, -1).await,
        Page::Submit => submit(conn, v, req, trace).await,
        Page::NewComment => new_comment(conn, v, world, req, trace, false).await,
        Page::Reply => new_comment(conn, v, world, req, trace, true).await,
        Page::Login => login(conn, req, trace).await,
        // Logging out only clears the browser's session cookie.
        Page::Logout => Ok(()),
    }
}

fn viewer(req: &Request) -> Result<i64> {
    req.viewer
        .ok_or_else(|| anyhow!("{} needs a logged-in user", req.page.name()))
}

/// Every logged-in page: load the user by session token and count unread
/// notifications (the app caches the count in `keystores`).
async fn session(conn: &mut Conn, v: Variant, uid: i64, trace: &mut Trace) -> Result<()> {
    let u = rows(
        conn,
        "SELECT u.id, u.username, u.is_moderator FROM users u WHERE u.session_token = ?",
        params![format!("sess{uid}")],
    )
    .await?;
    let id = u.first().map(|r| get_i64(r, 0)).transpose()?;
    trace.line(|| format!("session {uid} -> {id:?}"));
    let unread = match v {
        Variant::Original => {
            let r = rows(
                conn,
                "SELECT k.value FROM keystores k WHERE k.`key` = ?",
                params![format!("user:{uid}:unread_messages")],
            )
            .await?;
            r.first().map(|r| i64_or0(r, 0)).transpose()?.unwrap_or(0)
        }
        Variant::Natural => {
            let r = rows(
                conn,
                "SELECT COUNT(*) FROM messages m WHERE m.recipient_user_id = ? AND m.has_been_read = 0 AND m.deleted_by_recipient = 0",
                params![uid],
            )
            .await?;
            r.first().map(|r| i64_or0(r, 0)).transpose()?.unwrap_or(0)
        }
    };
    trace.line(|| format!("unread {unread}"));
    Ok(())
}

async fn users_by_id(conn: &mut Conn, ids: &[i64], trace: &mut Trace) -> Result<()> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT u.id, u.username FROM users u WHERE u.id IN ({})",
        placeholders(ids.len())
    );
    let r = rows(conn, &sql, ids.iter().map(|&i| Value::from(i)).collect()).await?;
    let lines = r
        .iter()
        .map(|r| Ok(format!("{} {}", get_i64(r, 0)?, text(r, 1)?)))
        .collect::<Result<_>>()?;
    trace.sorted("users", lines);
    Ok(())
}

async fn tags_of(conn: &mut Conn, story_ids: &[i64], trace: &mut Trace) -> Result<()> {
    if story_ids.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT t.story_id, t.tag_id FROM taggings t WHERE t.story_id IN ({})",
        placeholders(story_ids.len())
    );
    let r = rows(
        conn,
        &sql,
        story_ids.iter().map(|&i| Value::from(i)).collect(),
    )
    .await?;
    let mut tag_ids = Vec::new();
    let mut lines = Vec::new();
    for row in &r {
        let (s, t) = (get_i64(row, 0)?, get_i64(row, 1)?);
        tag_ids.push(t);
        lines.push(format!("{s}:{t}"));
    }
    trace.sorted("taggings", lines);
    tag_ids.sort_unstable();
    tag_ids.dedup();
    if tag_ids.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT g.id, g.tag, g.is_media FROM tags g WHERE g.id IN ({})",
        placeholders(tag_ids.len())
    );
    let r = rows(
        conn,
        &sql,
        tag_ids.iter().map(|&i| Value::from(i)).collect(),
    )
    .await?;
    let lines = r
        .iter()
        .map(|r| Ok(format!("{} {}", get_i64(r, 0)?, text(r, 1)?)))
        .collect::<Result<_>>()?;
    trace.sorted("tags", lines);
    Ok(())
}

/// The viewer's votes, hidden and saved rows for some stories.
async fn viewer_story_state(
    conn: &mut Conn,
    uid: i64,
    ids: &[i64],
    trace: &mut Trace,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let list = placeholders(ids.len());
    let with_user = |uid: i64| {
        let mut p = params![uid];
        p.extend(ids.iter().map(|&i| Value::from(i)));
        p
    };
    let r = rows(
        conn,
        &format!("SELECT v.story_id, v.vote FROM votes v WHERE v.user_id = ? AND v.comment_id IS NULL AND v.story_id IN ({list})"),
        with_user(uid),
    )
    .await?;
    let lines = r
        .iter()
        .map(|r| Ok(format!("{}:{}", get_i64(r, 0)?, get_i64(r, 1)?)))
        .collect::<Result<_>>()?;
    trace.sorted("my votes", lines);
    for table in ["hidden_stories", "saved_stories"] {
        let r = rows(
            conn,
            &format!(
                "SELECT x.story_id FROM {table} x WHERE x.user_id = ? AND x.story_id IN ({list})"
            ),
            with_user(uid),
        )
        .await?;
        let lines = r
            .iter()
            .map(|r| Ok(get_i64(r, 0)?.to_string()))
            .collect::<Result<_>>()?;
        trace.sorted(table, lines);
    }
    Ok(())
}

async fn story_page(
    conn: &mut Conn,
    v: Variant,
    world: &World,
    req: &Request,
    trace: &mut Trace,
) -> Result<()> {
    let short = &world.stories[req.story].1;
    let r = rows(
        conn,
        &format!("{} WHERE s.short_id = ?", story_select(v)),
        params![short.as_str()],
    )
    .await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no story {short}"));
        return Ok(());
    };
    let story = StoryRow::parse(v, row)?;
    trace.line(|| story.render());
    let sid = story.id;
    users_by_id(conn, &[story.user_id], trace).await?;
    let merged = rows(
        conn,
        "SELECT s.id FROM stories s WHERE s.merged_story_id = ?",
        params![sid],
    )
    .await?;
    trace.line(|| format!("merged {}", merged.len()));

    if let Some(uid) = req.viewer {
        // Read ribbon upsert.
        let at = datetime(req.now_ts);
        let r = rows(
            conn,
            "SELECT r.id FROM read_ribbons r WHERE r.user_id = ? AND r.story_id = ?",
            params![uid, sid],
        )
        .await?;
        match r.first() {
            Some(row) => {
                let id = get_i64(row, 0)?;
                run(
                    conn,
                    "UPDATE read_ribbons SET updated_at = ? WHERE id = ?",
                    params![at, id],
                )
                .await?;
            }
            None => {
                run(
                    conn,
                    "INSERT INTO read_ribbons (is_following, created_at, updated_at, user_id, story_id) VALUES (1, ?, ?, ?, ?)",
                    params![at.clone(), at, uid, sid],
                )
                .await?;
            }
        }
    }

    let order = match v {
        Variant::Original => "c.confidence DESC, c.id ASC",
        Variant::Natural => "COALESCE(v.score, 0) DESC, c.id ASC",
    };
    let r = rows(
        conn,
        &format!(
            "{} WHERE c.story_id = ? ORDER BY {order}",
            comment_select(v)
        ),
        params![sid],
    )
    .await?;
    let mut authors = Vec::with_capacity(r.len());
    for row in &r {
        let (author, _, line) = render_comment(v, row)?;
        authors.push(author);
        trace.line(|| line);
    }
    users_by_id(conn, &authors, trace).await?;

    if let Some(uid) = req.viewer {
        let r = rows(
            conn,
            "SELECT v.comment_id, v.vote FROM votes v WHERE v.user_id = ? AND v.story_id = ?",
            params![uid, sid],
        )
        .await?;
        let lines = r
            .iter()
            .map(|r| Ok(format!("{}:{}", text(r, 0)?, get_i64(r, 1)?)))
            .collect::<Result<_>>()?;
        trace.sorted("my votes", lines);
        for table in ["hidden_stories", "saved_stories"] {
            let r = rows(
                conn,
                &format!("SELECT x.id FROM {table} x WHERE x.user_id = ? AND x.story_id = ?"),
                params![uid, sid],
            )
            .await?;
            trace.line(|| format!("{table} {}", r.len()));
        }
    }
    tags_of(conn, &[sid], trace).await
}

async fn story_list(
    conn: &mut Conn,
    v: Variant,
    req: &Request,
    trace: &mut Trace,
    hottest: bool,
) -> Result<()> {
    if let Some(uid) = req.viewer {
        let r = rows(
            conn,
            "SELECT f.tag_id FROM tag_filters f WHERE f.user_id = ?",
            params![uid],
        )
        .await?;
        trace.line(|| format!("tag filters {}", r.len()));
    }
    let r = rows(conn, &story_list_sql(v, hottest), Vec::new()).await?;
    let stories = r
        .iter()
        .map(|row| StoryRow::parse(v, row))
        .collect::<Result<Vec<_>>>()?;
    for s in &stories {
        trace.line(|| s.render());
    }
    let ids: Vec<i64> = stories.iter().map(|s| s.id).collect();
    let authors: Vec<i64> = stories.iter().map(|s| s.user_id).collect();
    users_by_id(conn, &authors, trace).await?;
    if let Some(uid) = req.viewer {
        viewer_story_state(conn, uid, &ids, trace).await?;
    }
    tags_of(conn, &ids, trace).await
}

async fn comments_page(
    conn: &mut Conn,
    v: Variant,
    req: &Request,
    trace: &mut Trace,
) -> Result<()> {
    let sql = format!(
        "{} WHERE c.is_deleted = 0 AND c.is_moderated = 0 ORDER BY c.id DESC LIMIT 40",
        comment_select(v)
    );
    let r = rows(conn, &sql, Vec::new()).await?;
    let mut authors = Vec::new();
    let mut stories = Vec::new();
    let mut comment_ids = Vec::new();
    for row in &r {
        let (author, story, line) = render_comment(v, row)?;
        authors.push(author);
        stories.push(story);
        comment_ids.push(get_i64(row, 0)?);
        trace.line(|| line);
    }
    stories.sort_unstable();
    stories.dedup();
    if !stories.is_empty() {
        let sql = format!(
            "SELECT s.id, s.title, s.short_id FROM stories s WHERE s.id IN ({})",
            placeholders(stories.len())
        );
        let r = rows(
            conn,
            &sql,
            stories.iter().map(|&i| Value::from(i)).collect(),
        )
        .await?;
        let lines = r
            .iter()
            .map(|r| Ok(format!("{} {}", get_i64(r, 0)?, text(r, 1)?)))
            .collect::<Result<_>>()?;
        trace.sorted("stories", lines);
    }
    users_by_id(conn, &authors, trace).await?;
    if let (Some(uid), false) = (req.viewer, comment_ids.is_empty()) {
        let sql = format!(
            "SELECT v.comment_id, v.vote FROM votes v WHERE v.user_id = ? AND v.comment_id IN ({})",
            placeholders(comment_ids.len())
        );
        let mut p = params![uid];
        p.extend(comment_ids.iter().map(|&i| Value::from(i)));
        let r = rows(conn, &sql, p).await?;
        let lines = r
            .iter()
            .map(|r| Ok(format!("{}:{}", get_i64(r, 0)?, get_i64(r, 1)?)))
            .collect::<Result<_>>()?;
        trace.sorted("my votes", lines);
    }
    Ok(())
}

async fn user_page(conn: &mut Conn, v: Variant, req: &Request, trace: &mut Trace) -> Result<()> {
    let name = format!("user{}", req.target_user);
    let (sql, karma_col) = match v {
        Variant::Original => ("SELECT u.id, u.username, u.created_at, u.is_moderator, u.karma FROM users u WHERE u.username = ?", true),
        Variant::Natural => ("SELECT u.id, u.username, u.created_at, u.is_moderator FROM users u WHERE u.username = ?", false),
    };
    let r = rows(conn, sql, params![name.as_str()]).await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no user {name}"));
        return Ok(());
    };
    let uid = get_i64(row, 0)?;
    let karma = if karma_col {
        i64_or0(row, 4)?
    } else {
        let s = rows(
            conn,
            "SELECT SUM(v.vote) FROM votes v JOIN stories s ON s.id = v.story_id WHERE v.comment_id IS NULL AND s.user_id = ?",
            params![uid],
        )
        .await?;
        let c = rows(
            conn,
            "SELECT SUM(v.vote) FROM votes v JOIN comments c ON c.id = v.comment_id WHERE c.user_id = ?",
            params![uid],
        )
        .await?;
        let first = |r: &[Row]| -> Result<i64> {
            Ok(r.first()
                .map(|r| opt_i64(r, 0))
                .transpose()?
                .flatten()
                .unwrap_or(0))
        };
        first(&s)? + first(&c)?
    };
    trace.line(|| format!("user {uid} {name} karma {karma}"));
    let stories = rows(
        conn,
        "SELECT COUNT(*) FROM stories s WHERE s.user_id = ?",
        params![uid],
    )
    .await?;
    let comments = rows(
        conn,
        "SELECT COUNT(*) FROM comments c WHERE c.user_id = ? AND c.is_deleted = 0",
        params![uid],
    )
    .await?;
    let n = |r: &[Row]| -> Result<i64> {
        r.first()
            .map(|r| i64_or0(r, 0))
            .transpose()
            .map(|x| x.unwrap_or(0))
    };
    let (ns, nc) = (n(&stories)?, n(&comments)?);
    trace.line(|| format!("stories {ns} comments {nc}"));
    let tag = rows(
        conn,
        "SELECT g.id, g.tag, COUNT(*) AS n FROM tags g JOIN taggings t ON t.tag_id = g.id JOIN stories s ON s.id = t.story_id \
         WHERE g.inactive = 0 AND s.user_id = ? GROUP BY g.id, g.tag ORDER BY n DESC, g.id ASC LIMIT 1",
        params![uid],
    )
    .await?;
    let tag = tag.first().map(|r| text(r, 1)).transpose()?;
    trace.line(|| format!("top tag {tag:?}"));
    let hats = rows(
        conn,
        "SELECT h.id, h.hat, h.link FROM hats h WHERE h.user_id = ? AND h.doffed_at IS NULL",
        params![uid],
    )
    .await?;
    let lines = hats.iter().map(|r| text(r, 1)).collect::<Result<_>>()?;
    trace.sorted("hats", lines);
    Ok(())
}

async fn story_vote(
    conn: &mut Conn,
    v: Variant,
    world: &World,
    req: &Request,
    trace: &mut Trace,
    dir: i64,
) -> Result<()> {
    let uid = viewer(req)?;
    let short = &world.stories[req.story].1;
    let r = rows(
        conn,
        "SELECT s.id, s.user_id FROM stories s WHERE s.short_id = ?",
        params![short.as_str()],
    )
    .await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no story {short}"));
        return Ok(());
    };
    let (sid, author) = (get_i64(row, 0)?, get_i64(row, 1)?);
    let existing = rows(
        conn,
        "SELECT v.id, v.vote FROM votes v WHERE v.user_id = ? AND v.story_id = ? AND v.comment_id IS NULL",
        params![uid, sid],
    )
    .await?;
    if !existing.is_empty() {
        trace.line(|| format!("already voted on {sid}"));
        return Ok(());
    }
    run(
        conn,
        "INSERT INTO votes (user_id, story_id, comment_id, vote) VALUES (?, ?, NULL, ?)",
        params![uid, sid, dir],
    )
    .await?;
    if v == Variant::Original {
        run(
            conn,
            "UPDATE users SET karma = karma + ? WHERE id = ?",
            params![dir, author],
        )
        .await?;
        let (up, down) = if dir > 0 { (1, 0) } else { (0, 1) };
        run(
            conn,
            "UPDATE stories SET upvotes = upvotes + ?, downvotes = downvotes + ?, hotness = hotness - ? WHERE id = ?",
            params![up, down, dir * HOTNESS_VOTE_SECS, sid],
        )
        .await?;
    }
    trace.line(|| format!("voted {dir} on story {sid}"));
    Ok(())
}

async fn comment_vote(
    conn: &mut Conn,
    v: Variant,
    world: &World,
    req: &Request,
    trace: &mut Trace,
    dir: i64,
) -> Result<()> {
    let uid = viewer(req)?;
    let short = &world.comments[req.comment].0;
    let r = rows(
        conn,
        "SELECT c.id, c.user_id, c.story_id FROM comments c WHERE c.short_id = ?",
        params![short.as_str()],
    )
    .await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no comment {short}"));
        return Ok(());
    };
    let (cid, author, sid) = (get_i64(row, 0)?, get_i64(row, 1)?, get_i64(row, 2)?);
    let existing = rows(
        conn,
        "SELECT v.id, v.vote FROM votes v WHERE v.user_id = ? AND v.comment_id = ?",
        params![uid, cid],
    )
    .await?;
    if !existing.is_empty() {
        trace.line(|| format!("already voted on comment {cid}"));
        return Ok(());
    }
    run(
        conn,
        "INSERT INTO votes (user_id, story_id, comment_id, vote) VALUES (?, ?, ?, ?)",
        params![uid, sid, cid, dir],
    )
    .await?;
    if v == Variant::Original {
        run(
            conn,
            "UPDATE users SET karma = karma + ? WHERE id = ?",
            params![dir, author],
        )
        .await?;
        let (up, down) = if dir > 0 { (1, 0) } else { (0, 1) };
        run(
            conn,
            "UPDATE comments SET upvotes = upvotes + ?, downvotes = downvotes + ?, confidence = confidence + ? WHERE id = ?",
            params![up, down, dir, cid],
        )
        .await?;
    }
    trace.line(|| format!("voted {dir} on comment {cid}"));
    Ok(())
}

async fn submit(conn: &mut Conn, v: Variant, req: &Request, trace: &mut Trace) -> Result<()> {
    let uid = viewer(req)?;
    let short = req.new_short_id.as_str();
    let taken = rows(
        conn,
        "SELECT s.id FROM stories s WHERE s.short_id = ?",
        params![short],
    )
    .await?;
    if !taken.is_empty() {
        trace.line(|| format!("short id {short} taken"));
        return Ok(());
    }
    let at = datetime(req.now_ts);
    let title = format!("submitted story {}", base36(req.title_seed));
    let url = format!("https://example.com/new/{}", base36(req.title_seed));
    let desc = "a new story";
    let sid = match v {
        Variant::Original => {
            insert(
                conn,
                "INSERT INTO stories (created_at, created_ts, user_id, url, title, description, short_id, markeddown_description, upvotes, downvotes, hotness, comments_count) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, 0)",
                params![at, req.now_ts, uid, url, title, desc, short, desc, super::schema::hotness(1, req.now_ts)],
            )
            .await?
        }
        Variant::Natural => {
            insert(
                conn,
                "INSERT INTO stories (created_at, created_ts, user_id, url, title, description, short_id, markeddown_description) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                params![at, req.now_ts, uid, url, title, desc, short, desc],
            )
            .await?
        }
    };
    run(
        conn,
        "INSERT INTO taggings (story_id, tag_id) VALUES (?, ?)",
        params![sid, req.tag],
    )
    .await?;
    run(
        conn,
        "INSERT INTO votes (user_id, story_id, comment_id, vote) VALUES (?, ?, NULL, 1)",
        params![uid, sid],
    )
    .await?;
    if v == Variant::Original {
        run(
            conn,
            "UPDATE users SET karma = karma + 1 WHERE id = ?",
            params![uid],
        )
        .await?;
    }
    trace.line(|| format!("submitted {sid} {short}"));
    Ok(())
}

async fn new_comment(
    conn: &mut Conn,
    v: Variant,
    world: &World,
    req: &Request,
    trace: &mut Trace,
    reply: bool,
) -> Result<()> {
    let uid = viewer(req)?;
    // A reply answers a random comment on that comment's story.
    let (story_idx, parent_short) = if reply {
        let (short, idx) = &world.comments[req.comment];
        (*idx, Some(short.as_str()))
    } else {
        (req.story, None)
    };
    let short = &world.stories[story_idx].1;
    let r = rows(
        conn,
        "SELECT s.id, s.user_id FROM stories s WHERE s.short_id = ?",
        params![short.as_str()],
    )
    .await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no story {short}"));
        return Ok(());
    };
    let sid = get_i64(row, 0)?;
    let (parent, thread) = match parent_short {
        Some(p) => {
            let r = rows(
                conn,
                "SELECT c.id, c.thread_id FROM comments c WHERE c.story_id = ? AND c.short_id = ?",
                params![sid, p],
            )
            .await?;
            match r.first() {
                Some(row) => {
                    let id = get_i64(row, 0)?;
                    (Some(id), Some(opt_i64(row, 1)?.unwrap_or(id)))
                }
                None => (None, None),
            }
        }
        None => (None, None),
    };
    let at = datetime(req.now_ts);
    let body = format!("comment {}", base36(req.title_seed));
    let html = format!("<p>{body}</p>");
    let new_short = req.new_short_id.as_str();
    let cid = match v {
        Variant::Original => {
            insert(
                conn,
                "INSERT INTO comments (created_at, updated_at, short_id, story_id, user_id, parent_comment_id, thread_id, comment, markeddown_comment, upvotes, downvotes, confidence) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 1)",
                params![at.clone(), at, new_short, sid, uid, parent, thread, body, html],
            )
            .await?
        }
        Variant::Natural => {
            insert(
                conn,
                "INSERT INTO comments (created_at, updated_at, short_id, story_id, user_id, parent_comment_id, thread_id, comment, markeddown_comment) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params![at.clone(), at, new_short, sid, uid, parent, thread, body, html],
            )
            .await?
        }
    };
    run(
        conn,
        "INSERT INTO votes (user_id, story_id, comment_id, vote) VALUES (?, ?, ?, 1)",
        params![uid, sid, cid],
    )
    .await?;
    if v == Variant::Original {
        run(
            conn,
            "UPDATE stories SET comments_count = comments_count + 1 WHERE id = ?",
            params![sid],
        )
        .await?;
        run(
            conn,
            "UPDATE users SET karma = karma + 1 WHERE id = ?",
            params![uid],
        )
        .await?;
    }
    trace.line(|| format!("commented {cid} on {sid} parent {parent:?}"));
    Ok(())
}

async fn login(conn: &mut Conn, req: &Request, trace: &mut Trace) -> Result<()> {
    let name = format!("user{}", req.target_user);
    let r = rows(
        conn,
        "SELECT u.id, u.password_digest, u.session_token FROM users u WHERE u.username = ?",
        params![name.as_str()],
    )
    .await?;
    let Some(row) = r.first() else {
        trace.line(|| format!("no user {name}"));
        return Ok(());
    };
    let uid = get_i64(row, 0)?;
    run(
        conn,
        "UPDATE users SET session_token = ? WHERE id = ?",
        params![format!("sess{uid}"), uid],
    )
    .await?;
    trace.line(|| format!("login {uid}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn mix_totals_100k_and_matches_proportions() {
        let mix = page_mix();
        assert_eq!(mix.total(), 100_000);
        let mut rng = StdRng::seed_from_u64(11);
        let n = 1_000_000u64;
        let mut counts = std::collections::HashMap::new();
        for _ in 0..n {
            *counts.entry(mix.sample(&mut rng)).or_insert(0u64) += 1;
        }
        for p in Page::ALL {
            let expected = p.weight() as f64 / 100_000.0 * n as f64;
            let got = *counts.get(&p).unwrap_or(&0) as f64;
            // Within five standard deviations of a binomial count.
            let sd = (expected * (1.0 - p.weight() as f64 / 100_000.0)).sqrt();
            assert!(
                (got - expected).abs() <= 5.0 * sd + 1.0,
                "{p:?}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn requests_are_deterministic_and_in_range() {
        let stories = (1..=50).map(|i| (i, base36(i as u64))).collect();
        let comments = (1..=100).map(|i| (base36(i), (i % 50) as usize)).collect();
        let w = World::new(stories, comments, 20, 5).unwrap();
        let gen = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200)
                .map(|i| {
                    let r = w.request(&mut rng, Page::ALL[i % 14], 0.5, 1000 + i as i64);
                    assert!(r.story < 50 && r.comment < 100);
                    assert!((1..=20).contains(&r.target_user) && (1..=5).contains(&r.tag));
                    assert!(!r.page.needs_user() || r.viewer.is_some());
                    format!("{r:?}")
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(gen(1), gen(1));
        assert_ne!(gen(1), gen(2));
        assert!(World::new(Vec::new(), Vec::new(), 0, 0).is_err());
    }

    #[test]
    fn natural_queries_carry_no_counter_columns() {
        let nat = [
            story_list_sql(Variant::Natural, true),
            comment_select(Variant::Natural),
        ]
        .join(" ");
        for col in [
            "upvotes",
            "downvotes",
            "hotness",
            "comments_count",
            "confidence",
            "karma",
        ] {
            assert!(!nat.contains(col), "{col} in {nat}");
        }
        assert!(story_list_sql(Variant::Original, true)
            .contains("ORDER BY s.hotness ASC, s.id ASC LIMIT 51"));
    }
}
