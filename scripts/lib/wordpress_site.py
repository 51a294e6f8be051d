"""Drives one WordPress site over HTTP for scripts/wordpress.sh (stdlib only).

    wordpress_site.py build URL OUT        install, create content, fetch pages into OUT
    wordpress_site.py compare A B DIFFS    per-page match/differ table of two OUT dirs
    wordpress_site.py errors LOG...        the failed queries in WordPress debug logs

Everything goes through WordPress as a user or client would: the install is the
wp-admin/install.php?step=2 form, content is created over XML-RPC (wp.newPost,
wp.newComment, wp.editComment), pages are plain GET requests. Dates are fixed
so that both sites render the same archives; what legitimately differs between
two runs (host and port, nonces, the feed's build date) is normalised before
comparing.
"""

import difflib
import json
import os
import re
import sys
import urllib.parse
import urllib.request
import xmlrpc.client
from datetime import datetime, timedelta

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
    (some threaded) on every third post. Returns the ids WordPress gave."""
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
    return {"posts": posts, "comments": comments}


def category_id(url, name):
    rpc = xmlrpc.client.ServerProxy(url + "/xmlrpc.php", allow_none=True)
    for term in rpc.wp.getTerms(1, ADMIN, PASSWORD, "category"):
        if term["name"] == name:
            return term["term_id"]
    raise SystemExit(f"category {name} not found at {url}")


def pages(url, ids):
    cat = category_id(url, "Engineering")
    with_comments = ids["posts"][COMMENTS_EVERY * 2]
    return {
        "front": "/",
        "front-page-2": "/?paged=2",
        "category-archive": f"/?cat={cat}",
        "tag-archive": "/?tag=mysql",
        "date-archive": "/?m=202402",
        "search": "/?s=dataflow",
        "rss-feed": "/?feed=rss2",
        "comments-feed": "/?feed=comments-rss2",
        "single-post-with-comments": f"/?p={with_comments}",
    }


def build(url, out):
    os.makedirs(out, exist_ok=True)
    install(url)
    ids = populate(url)
    with open(os.path.join(out, "ids.json"), "w") as f:
        json.dump(ids, f)
    for name, path in pages(url, ids).items():
        status, body = http(url + path)
        with open(os.path.join(out, name + ".html"), "w") as f:
            f.write(f"HTTP {status} {path}\n{body}")


def normalise(text):
    text = re.sub(r"127\.0\.0\.1:\d+", "HOST", text)
    text = re.sub(r"(nonce[\"'_a-zA-Z]*[\"']?\s*[:=]\s*[\"']?)[0-9a-f]{10}", r"\1NONCE", text)
    text = re.sub(r"_wpnonce=[0-9a-f]{10}", "_wpnonce=NONCE", text)
    text = re.sub(r"<lastBuildDate>[^<]*</lastBuildDate>", "<lastBuildDate/>", text)
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
    print("| page | MariaDB vs Ladle | |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"pages matching: {len(rows) - differ} of {len(rows)}")
    return differ


ERROR = re.compile(r"WordPress database error (.*?) for query (.*) made by (.*)$", re.S)
ENTRY = re.compile(r"^\[\d\d-\w+-\d{4} [\d:]+ UTC\] ", re.M)


def errors(logs):
    """Prints each distinct failed query (error, query shape) with its count,
    then the total. Log entries span lines (queries keep their newlines)."""
    seen = {}
    for log in logs:
        if not os.path.exists(log):
            continue
        for entry in ENTRY.split(open(log, errors="replace").read()):
            m = ERROR.match(entry.strip())
            if not m:
                continue
            query = " ".join(m.group(2).split())
            shape = re.sub(r"\b\d+\b", "N", re.sub(r"'(?:[^'\\]|\\.)*'", "'?'", query))[:400]
            key = (m.group(1)[:200], shape)
            seen[key] = seen.get(key, 0) + 1
    total = sum(seen.values())
    for (err, shape), n in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d}  {err}\n        {shape}")
    return total


def main(argv):
    if argv[:1] == ["build"]:
        build(argv[1].rstrip("/"), argv[2])
    elif argv[:1] == ["compare"]:
        sys.exit(1 if compare(argv[1], argv[2], argv[3]) else 0)
    elif argv[:1] == ["errors"]:
        print(errors(argv[1:]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
