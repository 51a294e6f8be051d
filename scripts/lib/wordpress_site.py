"""Drives one WordPress site over HTTP for scripts/wordpress.sh (stdlib only).

    wordpress_site.py build URL OUT        install, create content, fetch pages into OUT
    wordpress_site.py compare A B DIFFS    per-page match/differ table of two OUT dirs
    wordpress_site.py errors LADLE_LOG MARIADB_LOG OUT   failed queries of both sites

Everything goes through WordPress as a user or client would: the install is the
wp-admin/install.php?step=2 form, content is created over XML-RPC (wp.newPost,
wp.newComment, wp.editComment), pages are plain GET requests. Dates are fixed
so that both sites render the same archives; what legitimately differs between
two runs (host and port, nonces, the feed's build date) is normalised before
comparing.
"""

import difflib
import http.cookiejar as http_cookiejar
import json
import os
import re
import sys
import urllib.parse
import urllib.request
import xmlrpc.client
from datetime import datetime, timedelta, timezone

ADMIN, PASSWORD = "admin", "ladle-wp-admin-pass"
CATEGORIES = ["News", "Engineering", "Releases", "Community"]
TAGS = ["rust", "mysql", "dataflow", "cache", "views", "replication", "wordpress"]
POSTS = 20
COMMENTS_EVERY = 3  # posts 0, 3, 6, ... get comments
WORDS = ("ladle serves reads from maintained views while writes flow through the dataflow "
         "graph and every query a framework sends should be answered as mysql answers it").split()


def http(url, data=None, timeout=120):
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers={"User-Agent": "ladle-wordpress-check"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")


def install(url):
    status, body = http(url + "/wp-admin/install.php?step=2", {
        "weblog_title": "Ladle check", "user_name": ADMIN, "admin_password": PASSWORD,
        "admin_password2": PASSWORD, "pw_weak": "1", "admin_email": "admin@example.com",
        "blog_public": "0", "language": "",
    })
    if status != 200 or "Success!" not in body:
        raise SystemExit(f"install failed at {url}: HTTP {status}\n{body[:2000]}")


def post_text(i):
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(60)]
    paras = [" ".join(words[k:k + 20]).capitalize() + "." for k in range(0, 60, 20)]
    return "\n\n".join(f"<!-- wp:paragraph -->\n<p>{p}</p>\n<!-- /wp:paragraph -->" for p in paras)


def populate(url):
    """20 posts, each in one or two categories with two or three tags; comments
    (some threaded) on every third post; then an edit and two deletions.
    Returns the ids WordPress gave."""
    rpc = xmlrpc.client.ServerProxy(url + "/xmlrpc.php", allow_none=True)
    start = datetime(2024, 1, 3, 9, 30)
    posts, comments = [], []
    for i in range(POSTS):
        when = start + timedelta(days=4 * i, hours=i % 5)
        cats = [CATEGORIES[i % 4]] + ([CATEGORIES[(i + 1) % 4]] if i % 5 == 0 else [])
        tags = [TAGS[i % 7], TAGS[(i + 2) % 7]] + ([TAGS[(i + 4) % 7]] if i % 2 else [])
        pid = rpc.wp.newPost(1, ADMIN, PASSWORD, {
            "post_type": "post", "post_status": "publish", "comment_status": "open",
            "post_title": f"Post {i + 1}: {WORDS[i % len(WORDS)]} {WORDS[(i + 5) % len(WORDS)]}",
            "post_content": post_text(i), "post_excerpt": "",
            "post_date_gmt": xmlrpc.client.DateTime(when),
            "terms_names": {"category": cats, "post_tag": tags},
        })
        posts.append(int(pid))
        if i % COMMENTS_EVERY == 0:
            parent = 0
            for c in range(3):
                cid = rpc.wp.newComment(1, ADMIN, PASSWORD, int(pid), {
                    "comment_parent": parent if c == 2 else 0,
                    "content": f"Comment {c + 1} on post {i + 1}: {' '.join(WORDS[c:c + 8])}",
                })
                rpc.wp.editComment(1, ADMIN, PASSWORD, int(cid), {
                    "date_created_gmt": xmlrpc.client.DateTime(when + timedelta(hours=c + 1)),
                    "status": "approve",
                })
                parent = int(cid)
                comments.append(int(cid))
    # Edits as an author makes them: new terms and title for one post
    # (its old category and tag links must go), one post to the trash,
    # one comment deleted.
    rpc.wp.editPost(1, ADMIN, PASSWORD, posts[1], {
        "post_title": "Post 2, edited",
        "terms_names": {"category": ["Releases"], "post_tag": ["cache", "views"]},
    })
    rpc.wp.deletePost(1, ADMIN, PASSWORD, posts[4])
    rpc.wp.deleteComment(1, ADMIN, PASSWORD, comments[1])
    # A sticky post (first on the front page), a draft, a post scheduled
    # for later, a page with a child page.
    rpc.wp.editPost(1, ADMIN, PASSWORD, posts[2], {"sticky": True})
    for status, title in (("draft", "A draft"), ("future", "Scheduled")):
        rpc.wp.newPost(1, ADMIN, PASSWORD, {
            "post_type": "post", "post_status": status, "post_title": title,
            "post_content": post_text(3),
            "post_date_gmt": xmlrpc.client.DateTime(datetime(2099, 1, 1, 12, 0)),
        })
    parent = rpc.wp.newPost(1, ADMIN, PASSWORD, {
        "post_type": "page", "post_status": "publish", "post_title": "About",
        "post_content": post_text(4), "post_date_gmt": xmlrpc.client.DateTime(start),
    })
    child = rpc.wp.newPost(1, ADMIN, PASSWORD, {
        "post_type": "page", "post_status": "publish", "post_title": "Team",
        "post_parent": int(parent), "post_content": post_text(5),
        "post_date_gmt": xmlrpc.client.DateTime(start),
    })
    # A page of the blocks that query on their own: archives by month,
    # categories with counts, a tag cloud, latest posts and comments, and
    # the calendar of February 2024 (its month is the page's query).
    blocks = ["archives {\"showPostCounts\":true}", "categories {\"showPostCounts\":true}",
              "tag-cloud", "latest-posts {\"postsToShow\":5}",
              "latest-comments {\"commentsToShow\":5}", "calendar", "page-list"]
    widgets = rpc.wp.newPost(1, ADMIN, PASSWORD, {
        "post_type": "page", "post_status": "publish", "post_title": "Widgets",
        "post_content": "\n".join(f"<!-- wp:{b} /-->" for b in blocks),
        "post_date_gmt": xmlrpc.client.DateTime(start),
    })
    # A visitor's comment through the post's form (held for moderation).
    status, body = http(url + "/wp-comments-post.php", {
        "comment_post_ID": posts[COMMENTS_EVERY * 2], "comment_parent": "0",
        "comment": "A visitor writes: does it answer as mysql answers?",
        "author": "Visitor", "email": "visitor@example.com", "url": "", "submit": "Post Comment",
    })
    if status != 200:
        raise SystemExit(f"the visitor's comment failed at {url}: HTTP {status}\n{body[:2000]}")
    return {"posts": posts, "comments": comments, "child": int(child), "widgets": int(widgets)}


def category_id(url, name):
    rpc = xmlrpc.client.ServerProxy(url + "/xmlrpc.php", allow_none=True)
    for term in rpc.wp.getTerms(1, ADMIN, PASSWORD, "category"):
        if term["name"] == name:
            return term["term_id"]
    raise SystemExit(f"category {name} not found at {url}")


def pages(url, ids):
    """Page name -> (path, a text the page must show: its content is there,
    not an empty list both sites would agree on)."""
    cat = category_id(url, "Engineering")
    with_comments = ids["posts"][COMMENTS_EVERY * 2]
    return {
        "front": ("/", "Post 20: "),
        "front-page-2": ("/?paged=2", "Post 2, edited"),
        "category-archive": (f"/?cat={cat}", "Post 18: "),
        "tag-archive": ("/?tag=mysql", "Post 16: "),
        "date-archive": ("/?m=202402", "Post 9: "),
        "search": ("/?s=dataflow", "Post 19: "),
        "rss-feed": ("/?feed=rss2", "Post 12: "),
        "comments-feed": ("/?feed=comments-rss2", "Comment 3 on post 19"),
        "single-post-with-comments": (f"/?p={with_comments}", "Comment 2 on post 7"),
        "author-archive": ("/?author=1", "Post 20: "),
        "sample-page": ("/?page_id=2", "This is an example page"),
        "atom-feed": ("/?feed=atom", "Post 20: "),
        "category-feed": (f"/?feed=rss2&cat={cat}", "Post 18: "),
        "not-found": ("/?p=999999", "not found"),
        "child-page": (f"/?page_id={ids['child']}", "Team"),
        "rest-posts": ("/?rest_route=/wp/v2/posts&per_page=5&page=2", "Post 15: "),
        "rest-posts-in-category": (f"/?rest_route=/wp/v2/posts&categories={cat}&orderby=title&order=asc", "Post 18: "),
        "rest-categories": ("/?rest_route=/wp/v2/categories&orderby=count&order=desc", "Engineering"),
        "rest-tags": ("/?rest_route=/wp/v2/tags&search=a&hide_empty=true", "dataflow"),
        "rest-comments": (f"/?rest_route=/wp/v2/comments&post={with_comments}", "Comment 3 on post 7"),
        "rest-search": ("/?rest_route=/wp/v2/search&search=edited", "Post 2, edited"),
        "rest-pages": ("/?rest_route=/wp/v2/pages&parent=0&orderby=title&order=desc", "About"),
        "blocks-page": (f"/?page_id={ids['widgets']}", "February 2024"),
    }


# Admin screens a logged-in author opens (compared with their nonces,
# times and obfuscated e-mail addresses normalised).
ADMIN_PAGES = {
    "admin-dashboard": "/wp-admin/index.php",
    "admin-posts": "/wp-admin/edit.php",
    "admin-posts-by-month": "/wp-admin/edit.php?m=202402&cat=0",
    "admin-trash": "/wp-admin/edit.php?post_status=trash&post_type=post",
    "admin-categories": "/wp-admin/edit-tags.php?taxonomy=category",
    "admin-tags": "/wp-admin/edit-tags.php?taxonomy=post_tag",
    "admin-comments": "/wp-admin/edit-comments.php",
    "admin-users": "/wp-admin/users.php",
    "admin-pages": "/wp-admin/edit.php?post_type=page",
    "admin-search-posts": "/wp-admin/edit.php?s=dataflow&post_status=all&post_type=post",
    "admin-posts-by-category": "/wp-admin/edit.php?category_name=engineering",
    "admin-pending-comments": "/wp-admin/edit-comments.php?comment_status=moderated",
    "admin-post-comments": "/wp-admin/edit-comments.php?comment_status=all&p=1",
    "admin-drafts": "/wp-admin/edit.php?post_status=draft&post_type=post",
    "admin-scheduled": "/wp-admin/edit.php?post_status=future&post_type=post",
    "admin-sticky": "/wp-admin/edit.php?show_sticky=1",
    "admin-settings": "/wp-admin/options-general.php",
    "admin-export": "/wp-admin/export.php",
    "admin-media": "/wp-admin/upload.php?mode=list",
}


def login(url):
    """An opener logged in through wp-login.php (its cookie jar)."""
    jar = http_cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.addheaders = [("User-Agent", "ladle-wordpress-check")]
    opener.open(url + "/wp-login.php", timeout=120).read()
    form = urllib.parse.urlencode({"log": ADMIN, "pwd": PASSWORD, "wp-submit": "Log In",
                                   "redirect_to": url + "/wp-admin/", "testcookie": "1"})
    opener.open(url + "/wp-login.php", form.encode(), timeout=120).read()
    return opener


def pretty_permalinks(url, opener):
    """Switches to /%year%/%monthnum%/%day%/%postname%/ through the
    Permalink Settings form (php -S sends unknown paths to index.php)."""
    body = opener.open(url + "/wp-admin/options-permalink.php", timeout=120).read().decode()
    nonce = re.search(r'name="_wpnonce" value="([0-9a-f]+)"', body)
    if not nonce:
        raise SystemExit(f"no permalink settings form at {url}")
    form = urllib.parse.urlencode({
        "_wpnonce": nonce.group(1), "_wp_http_referer": "/wp-admin/options-permalink.php",
        "selection": "custom", "permalink_structure": "/%year%/%monthnum%/%day%/%postname%/",
        "category_base": "", "tag_base": "", "submit": "Save Changes",
    })
    opener.open(url + "/wp-admin/options-permalink.php", form.encode(), timeout=120).read()


def pretty_pages(ids):
    """Pages under pretty permalinks (a plain ?p= link is redirected)."""
    return {
        "pretty-front-page-2": ("/page/2/", "Post 2, edited"),
        "pretty-category": ("/category/engineering/", "Post 18: "),
        "pretty-tag": ("/tag/mysql/", "Post 16: "),
        "pretty-month": ("/2024/02/", "Post 9: "),
        "pretty-day": ("/2024/02/08/", "Post 10: "),
        "pretty-author": ("/author/admin/", "Post 20: "),
        "pretty-feed": ("/feed/", "Post 12: "),
        "pretty-search": ("/search/dataflow/", "Post 19: "),
        "pretty-child-page": ("/about/team/", "Team"),
        "pretty-post-redirected": (f"/?p={ids['posts'][COMMENTS_EVERY * 2]}", "Comment 2 on post 7"),
    }


def xmlrpc_reads(url, out, ids):
    """What a client reads over XML-RPC (posts by filter, comments, counts,
    terms), written as JSON for the comparison."""
    rpc = xmlrpc.client.ServerProxy(url + "/xmlrpc.php", allow_none=True)
    auth = (1, ADMIN, PASSWORD)
    reads = {
        "posts": rpc.wp.getPosts(*auth, {"post_type": "post", "number": 8, "offset": 2,
                                         "orderby": "post_date", "order": "ASC"},
                                 ["post_title", "post_date_gmt", "terms", "comment_status"]),
        "drafts": rpc.wp.getPosts(*auth, {"post_status": "draft"}, ["post_title"]),
        "comments": rpc.wp.getComments(*auth, {"status": "approve", "number": 6}),
        "pending": rpc.wp.getComments(*auth, {"status": "hold"}),
        "comment_count": rpc.wp.getCommentCount(*auth, ids["posts"][COMMENTS_EVERY * 2]),
        "tags": rpc.wp.getTerms(*auth, "post_tag", {"orderby": "count", "order": "DESC",
                                                    "hide_empty": True}),
        "recent": rpc.metaWeblog.getRecentPosts(*auth, 3),
    }
    text = json.dumps(reads, indent=1, sort_keys=True, default=str)
    # Edits and comments made now carry the run's time, by the second.
    text = re.sub(r"20\d\d\d\d\d\dT\d\d:\d\d:\d\d", lambda m: m.group(0)
                  if m.group(0) < "2026" else "RUN-TIME", text)
    missing = [] if "Post 3: " in text else ["xmlrpc-reads: no 'Post 3: '"]
    with open(os.path.join(out, "xmlrpc-reads.html"), "w") as f:
        f.write("XML-RPC reads\n" + text)
    return missing


def fetch(url, out, pages):
    """Writes each page into OUT; returns the pages without their text."""
    missing = []
    for name, (path, marker) in pages.items():
        status, body = http(url + path)
        if marker not in body:
            missing.append(f"{name}: no '{marker}'")
        with open(os.path.join(out, name + ".html"), "w") as f:
            f.write(f"HTTP {status} {path}\n{body}")
    return missing


def admin_pages(opener, url, out):
    """Fetches the admin screens as the logged-in author."""
    for name, path in ADMIN_PAGES.items():
        try:
            with opener.open(url + path, timeout=120) as resp:
                status, body = resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read().decode("utf-8", "replace")
        if "wp-login.php" in body[:2000] and "loginform" in body:
            status = "not logged in"
        with open(os.path.join(out, name + ".html"), "w") as f:
            f.write(f"HTTP {status} {path}\n{body}")


def build(url, out):
    os.makedirs(out, exist_ok=True)
    install(url)
    ids = populate(url)
    missing = fetch(url, out, pages(url, ids)) + xmlrpc_reads(url, out, ids)
    opener = login(url)
    admin_pages(opener, url, out)
    pretty_permalinks(url, opener)
    missing += fetch(url, out, pretty_pages(ids))
    with open(os.path.join(out, "missing.json"), "w") as f:
        json.dump(missing, f)


def run_day_patterns():
    """Timestamps of today (UTC), as WordPress prints them: what install
    time gave the first post and comment, and what differs between sites
    by the second. The content this script creates is dated 2024."""
    now = datetime.now(timezone.utc)
    days = {now, now - timedelta(hours=1)}  # a run that crosses midnight
    pats = []
    for d in days:
        pats.append(d.strftime("%Y-%m-%d") + r"[T ]\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d)?")
        pats.append(d.strftime("%a, %d %b %Y") + r" \d\d:\d\d:\d\d [+-]\d{4}")
        pats.append(d.strftime("%B ") + str(d.day) + d.strftime(", %Y") + r"(?: at \d{1,2}:\d\d [ap]m)?")
        pats.append(d.strftime("%Y/%m/%d") + r" at \d{1,2}:\d\d [ap]m")
    return re.compile("|".join(pats))


def normalise(text):
    text = re.sub(r"127\.0\.0\.1(?::|%3A)\d+", "HOST", text)
    text = run_day_patterns().sub("RUN-TIME", text)
    text = re.sub(r"(nonce[\"'_a-zA-Z]*[\"']?\s*[:=]\s*[\"']?)[0-9a-f]{10}", r"\1NONCE", text)
    text = re.sub(r"_wpnonce=[0-9a-f]{10}", "_wpnonce=NONCE", text)
    text = re.sub(r"<lastBuildDate>[^<]*</lastBuildDate>", "<lastBuildDate/>", text)
    # Admin screens: nonces are ten hex digits wherever they appear (form
    # fields, scripts' settings, links), and the page's own time.
    text = re.sub(r"(?<![0-9A-Za-z])[0-9a-f]{10}(?![0-9A-Za-z])", "NONCE", text)
    text = re.sub(r'"time":"\d+"', '"time":"T"', text)
    # The dashboard's "Recently Published" says when a post of this run was
    # published, to the minute: the two sites may straddle one.
    text = re.sub(r"<span>Today, \d{1,2}:\d\d [ap]m</span>", "<span>Today, RUN-TIME</span>", text)
    # General Settings shows each time format (and the chosen one's
    # preview) at the time of the request: the two sites may straddle a minute.
    text = re.sub(r'(<span class="(?:date-time-text format-i18n|example)">)\d{1,2}:\d\d(?: [apAP][mM])?(?=</span>)',
                  r"\1RUN-TIME", text)
    # Quick edit's time fields (of the post install made, and of now).
    text = re.sub(r'(<div class="(?:hh|mn|ss)">|name="(?:hh|mn|ss)" value=")\d\d', r"\1NN", text)
    # antispambot() writes e-mail addresses with random character references.
    text = re.sub(r"&#0*(\d+);", lambda m: chr(int(m.group(1))), text)
    return text


def compare(a, b, diffs):
    os.makedirs(diffs, exist_ok=True)
    names = sorted(n for n in os.listdir(a) if n.endswith(".html"))
    rows, differ = [], 0
    for name in names:
        left = normalise(open(os.path.join(a, name), errors="replace").read()).splitlines()
        path_b = os.path.join(b, name)
        right = normalise(open(path_b, errors="replace").read()).splitlines() if os.path.exists(path_b) else []
        if left == right:
            rows.append((name[:-5], "match", ""))
            continue
        differ += 1
        diff = list(difflib.unified_diff(left, right, os.path.basename(a), os.path.basename(b), lineterm=""))
        with open(os.path.join(diffs, name[:-5] + ".diff"), "w") as f:
            f.write("\n".join(diff) + "\n")
        changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        rows.append((name[:-5], "differ", f"{changed} lines, {diffs}/{name[:-5]}.diff"))
    # A page without its content matches nothing, even if both lack it.
    for side in (a, b):
        built = os.path.join(side, "missing.json")
        gaps = json.load(open(built)) if os.path.exists(built) else ["site: did not build"]
        if not os.path.exists(built):
            rows.append(("site", "not built", os.path.basename(side)))
            differ += 1
        for gap in gaps:
            name = gap.split(":")[0]
            for i, row in enumerate(rows):
                if row[0] == name:
                    differ += row[1] == "match"
                    rows[i] = (name, "empty", f"{os.path.basename(side)}: {gap}")
    print("| page | MariaDB vs Ladle | |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"pages matching: {sum(r[1] == 'match' for r in rows)} of {len(rows)}")
    return differ


# Logged by the mu-plugin scripts/wordpress.sh installs: every failed query,
# also those wpdb was told not to report.
ERROR = re.compile(r"Failed query: (.*?) for query (.*) \(end\)$", re.S)
ENTRY = re.compile(r"^\[\d\d-\w+-\d{4} [\d:]+ UTC\] ", re.M)


def failed_queries(log):
    """(error, query shape) -> how many times, from one site's debug log."""
    seen = {}
    if not os.path.exists(log):
        return seen
    for entry in ENTRY.split(open(log, errors="replace").read()):
        m = ERROR.match(entry.strip())
        if not m:
            continue
        query = " ".join(m.group(2).split())
        shape = re.sub(r"\b\d+\b", "N", re.sub(r"'(?:[^'\\]|\\.)*'", "'?'", query))[:400]
        key = (m.group(1)[:200], shape)
        seen[key] = seen.get(key, 0) + 1
    return seen


def errors(ladle_log, mariadb_log, out):
    """Writes each side's failed queries to OUT/<side>-errors.txt, prints
    the totals and the failures Ladle has beyond MariaDB's (a query shape
    failing more often, with the same error or another); returns how many."""
    sides = {"ladle": failed_queries(ladle_log), "mariadb": failed_queries(mariadb_log)}
    for side, seen in sides.items():
        with open(os.path.join(out, f"{side}-errors.txt"), "w") as f:
            for (err, shape), n in sorted(seen.items(), key=lambda kv: -kv[1]):
                f.write(f"{n:5d}  {err}\n       {shape}\n")
    by_shape = {}
    for (_, shape), n in sides["mariadb"].items():
        by_shape[shape] = by_shape.get(shape, 0) + n
    extra = []
    for (err, shape), n in sorted(sides["ladle"].items(), key=lambda kv: -kv[1]):
        excess = min(n, max(0, n - by_shape.get(shape, 0)))
        by_shape[shape] = max(0, by_shape.get(shape, 0) - n)
        if excess:
            extra.append((excess, err, shape))
    total = {side: sum(seen.values()) for side, seen in sides.items()}
    print(f"failed queries (also those WordPress suppresses): MariaDB {total['mariadb']}, "
          f"Ladle {total['ladle']}, Ladle beyond MariaDB {sum(e[0] for e in extra)}")
    for n, err, shape in extra:
        print(f"  {n:5d}  {err}\n         {shape[:300]}")
    return sum(e[0] for e in extra)


def main(argv):
    if argv[:1] == ["build"]:
        build(argv[1].rstrip("/"), argv[2])
    elif argv[:1] == ["compare"]:
        sys.exit(1 if compare(argv[1], argv[2], argv[3]) else 0)
    elif argv[:1] == ["errors"]:
        sys.exit(1 if errors(argv[1], argv[2], argv[3]) else 0)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
