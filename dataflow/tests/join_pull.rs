//! Cache misses on join views keyed by columns of both join inputs: the
//! pull starts from the indexed side. Mutate and requery, comparing each
//! view against a recomputation from the base rows.

mod common;

use common::*;
use ladle_common::{Row, TableSchema, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rows(e: &Env, t: &TableSchema) -> Vec<Row> {
    e.storage.scan(t.id).unwrap()
}

fn small(rng: &mut StdRng, max: i64) -> Value {
    if rng.gen_range(0..8) == 0 {
        Value::Null
    } else {
        i(rng.gen_range(0..max))
    }
}

/// `a JOIN b` (or LEFT JOIN) on `a[ac] = b[bc]`, as rows of both.
fn join(a: &[Row], b: &[Row], ac: usize, bc: usize, left: bool, bw: usize) -> Vec<Row> {
    let mut out = Vec::new();
    for x in a {
        let mut matched = false;
        for y in b {
            if !x[ac].is_null() && x[ac] == y[bc] {
                matched = true;
                let mut r = x.clone();
                r.extend(y.iter().cloned());
                out.push(r);
            }
        }
        if left && !matched {
            let mut r = x.clone();
            r.extend(std::iter::repeat_n(Value::Null, bw));
            out.push(r);
        }
    }
    out
}

#[test]
fn join_keyed_by_both_sides_inner_and_left() {
    for limit in [1 << 30, 4096] {
        run(limit);
    }
}

fn run(memory_limit: usize) {
    let e = env(memory_limit);
    // tags(id, inactive) has no index on `inactive`; the others are indexed.
    let tags = e.table("tags", &[("id", int()), ("inactive", int())]);
    e.table(
        "taggings",
        &[("id", int()), ("story_id", int()), ("tag_id", int())],
    );
    e.table("stories", &[("id", int()), ("user_id", int())]);
    e.index("taggings", "t_story", 1);
    let taggings = e.index("taggings", "t_tag", 2);
    let stories = e.index("stories", "s_user", 1);
    let mut rng = StdRng::seed_from_u64(7);
    e.insert(&tags, (0..8).map(|k| r(&[i(k), i(k % 2)])).collect());
    e.insert(
        &stories,
        (0..20).map(|k| r(&[i(k), small(&mut rng, 4)])).collect(),
    );
    e.insert(
        &taggings,
        (0..60)
            .map(|k| r(&[i(k), small(&mut rng, 22), small(&mut rng, 9)]))
            .collect(),
    );
    // (query, brute force over (tags, taggings, stories), key columns in the brute-force row)
    type Brute = fn(&[Row], &[Row], &[Row]) -> Vec<Row>;
    let shapes: Vec<(&str, Brute, [usize; 2], [usize; 3])> = vec![
        (
            "SELECT t.id, g.id, s.id FROM tags g JOIN taggings t ON t.tag_id = g.id \
             JOIN stories s ON s.id = t.story_id WHERE g.inactive = ? AND s.user_id = ?",
            |g, t, s| join(&join(g, t, 0, 2, false, 3), s, 3, 0, false, 2),
            [1, 6],
            [2, 0, 5],
        ),
        (
            "SELECT t.id, g.id, s.id FROM tags g JOIN taggings t ON t.tag_id = g.id \
             LEFT JOIN stories s ON s.id = t.story_id WHERE g.inactive = ? AND s.user_id = ?",
            |g, t, s| join(&join(g, t, 0, 2, false, 3), s, 3, 0, true, 2),
            [1, 6],
            [2, 0, 5],
        ),
        (
            "SELECT g.id, t.id FROM tags g LEFT JOIN taggings t ON t.tag_id = g.id \
             WHERE g.inactive = ? AND t.story_id = ?",
            |g, t, _| join(g, t, 0, 2, true, 3),
            [1, 3],
            [0, 2, 0],
        ),
        (
            "SELECT g.id, t.id FROM tags g LEFT JOIN taggings t ON t.tag_id = g.id \
             WHERE t.story_id = ? AND t.tag_id = ?",
            |g, t, _| join(g, t, 0, 2, true, 3),
            [3, 4],
            [0, 2, 0],
        ),
        (
            "SELECT s.id, t.id FROM stories s LEFT JOIN taggings t ON t.story_id = s.id \
             WHERE s.user_id = ? AND t.tag_id = ?",
            |_, t, s| join(s, t, 0, 1, true, 3),
            [1, 4],
            [0, 2, 0],
        ),
        (
            "SELECT s.id, t.id FROM stories s JOIN taggings t ON t.story_id = s.id \
             WHERE t.tag_id = ? AND s.user_id = ?",
            |_, t, s| join(s, t, 0, 1, false, 3),
            [4, 1],
            [0, 2, 0],
        ),
    ];
    let prepared: Vec<_> = shapes.iter().map(|(q, ..)| e.prepare(q)).collect();
    for step in 0..40 {
        let (g, t, s) = (rows(&e, &tags), rows(&e, &taggings), rows(&e, &stories));
        for ((q, brute, keys, out), p) in shapes.iter().zip(&prepared) {
            let full = brute(&g, &t, &s);
            for a in 0..3 {
                for b in 0..5 {
                    let params = [i(a), i(b)];
                    let want: Vec<Row> = full
                        .iter()
                        .filter(|r| r[keys[0]] == params[0] && r[keys[1]] == params[1])
                        .map(|r| {
                            out[..if q.starts_with("SELECT t.id") { 3 } else { 2 }]
                                .iter()
                                .map(|&c| r[c].clone())
                                .collect()
                        })
                        .collect();
                    let got = p.execute(&params).unwrap();
                    assert_eq!(
                        render(got, false),
                        render(want, false),
                        "step {step}: {q} with {params:?}"
                    );
                }
            }
        }
        // Mutate one of the tables.
        match rng.gen_range(0..6) {
            0 => {
                let k = rng.gen_range(0..8);
                let v = rng.gen_range(0..3);
                e.update_where(&tags, move |r| (r[0] == i(k)).then(|| vec![i(k), i(v)]));
            }
            1 => {
                let k = rng.gen_range(0..25);
                let u = small(&mut rng, 4);
                e.delete_where(&stories, move |r| r[0] == i(k));
                e.insert(&stories, vec![r(&[i(k), u])]);
            }
            2 => {
                let k = rng.gen_range(0..60);
                e.delete_where(&taggings, move |r| r[0] == i(k));
            }
            3 => {
                let k = 100 + step as i64;
                e.insert(
                    &taggings,
                    vec![r(&[i(k), small(&mut rng, 22), small(&mut rng, 9)])],
                );
            }
            4 => {
                let k = rng.gen_range(0..60);
                let st = small(&mut rng, 22);
                e.update_where(&taggings, move |r| {
                    (r[0] == i(k)).then(|| vec![i(k), st.clone(), r[2].clone()])
                });
            }
            _ => {
                let k = rng.gen_range(0..25);
                e.delete_where(&stories, move |r| r[0] == i(k));
            }
        }
    }
}

/// A join looked up by many keys at once (an IN list, or a grouped view's
/// cold partitions) pulls its keyed input for all of them and its other
/// input once for all their join keys: each key still gets exactly its
/// own rows, with NULL join keys extended (LEFT) or dropped, join keys
/// shared between keys, and keys asked twice.
#[test]
fn join_looked_up_by_many_keys_at_once() {
    let e = env(1 << 30);
    e.table(
        "taggings",
        &[("id", int()), ("story_id", int()), ("tag_id", int())],
    );
    e.table("stories", &[("id", int()), ("user_id", int())]);
    e.index("taggings", "t_story", 1);
    let taggings = e.index("taggings", "t_tag", 2);
    let stories = e.index("stories", "s_user", 1);
    let mut rng = StdRng::seed_from_u64(11);
    e.insert(
        &stories,
        (0..30).map(|k| r(&[i(k), small(&mut rng, 7)])).collect(),
    );
    e.insert(
        &taggings,
        (0..120)
            .map(|k| r(&[i(k), small(&mut rng, 34), small(&mut rng, 9)]))
            .collect(),
    );
    // (query, brute force over (taggings, stories), key column and output
    // columns in the brute-force row)
    type Brute = fn(&[Row], &[Row]) -> Vec<Row>;
    let shapes: Vec<(&str, Brute, usize, [usize; 2])> = vec![
        (
            "SELECT t.id, s.id FROM taggings t LEFT JOIN stories s ON s.id = t.story_id \
             WHERE t.tag_id IN (?, ?, ?, ?)",
            |t, s| join(t, s, 1, 0, true, 2),
            2,
            [0, 3],
        ),
        (
            "SELECT t.id, s.id FROM taggings t JOIN stories s ON s.id = t.story_id \
             WHERE s.user_id IN (?, ?, ?, ?)",
            |t, s| join(t, s, 1, 0, false, 2),
            4,
            [0, 3],
        ),
        (
            "SELECT s.id, t.id FROM stories s LEFT JOIN taggings t ON t.story_id = s.id \
             WHERE t.tag_id IN (?, ?, ?, ?)",
            |t, s| join(s, t, 0, 1, true, 3),
            4,
            [0, 2],
        ),
        (
            "SELECT s.id, t.id FROM stories s JOIN taggings t ON t.story_id = s.id \
             WHERE s.user_id IN (?, ?, ?, ?)",
            |t, s| join(s, t, 0, 1, false, 3),
            1,
            [0, 2],
        ),
    ];
    let prepared: Vec<_> = shapes.iter().map(|(q, ..)| e.prepare(q)).collect();
    // Counts per key over the same join: its cold partitions are pulled
    // through the join together.
    let counts = e.prepare(
        "SELECT t.tag_id, COUNT(s.id), COUNT(*) FROM taggings t \
         LEFT JOIN stories s ON s.id = t.story_id WHERE t.tag_id IN (?, ?, ?) GROUP BY t.tag_id",
    );
    for step in 0..30 {
        let (t, s) = (rows(&e, &taggings), rows(&e, &stories));
        for ((q, brute, key, out), p) in shapes.iter().zip(&prepared) {
            let full = brute(&t, &s);
            // Keys repeated, absent and shared.
            let params: Vec<Value> = (0..4).map(|_| i(rng.gen_range(0..7))).collect();
            let want: Vec<Row> = full
                .iter()
                .filter(|r| params.contains(&r[*key]))
                .map(|r| out.iter().map(|&c| r[c].clone()).collect())
                .collect();
            let got = p.execute(&params).unwrap();
            assert_eq!(
                render(got, false),
                render(want, false),
                "step {step}: {q} with {params:?}"
            );
        }
        let params: Vec<Value> = (0..3).map(|_| i(rng.gen_range(0..9))).collect();
        let joined = join(&t, &s, 1, 0, true, 2);
        let mut want = Vec::new();
        for tag in 0..9 {
            let rows: Vec<&Row> = joined.iter().filter(|r| r[2] == i(tag)).collect();
            if !rows.is_empty() && params.contains(&i(tag)) {
                let matched = rows.iter().filter(|r| !r[3].is_null()).count() as i64;
                want.push(r(&[i(tag), i(matched), i(rows.len() as i64)]));
            }
        }
        let got = counts.execute(&params).unwrap();
        assert_eq!(
            render(got, false),
            render(want, false),
            "step {step}: counts {params:?}"
        );
        // Change both tables.
        let k = 1000 + step as i64;
        e.insert(
            &taggings,
            vec![r(&[i(k), small(&mut rng, 30), small(&mut rng, 9)])],
        );
        let st = rng.gen_range(0..30);
        let user = small(&mut rng, 7);
        e.delete_where(&stories, move |r| r[0] == i(st));
        e.insert(&stories, vec![r(&[i(st), user])]);
        let gone = rng.gen_range(0..120);
        e.delete_where(&taggings, move |r| r[0] == i(gone));
    }
}
