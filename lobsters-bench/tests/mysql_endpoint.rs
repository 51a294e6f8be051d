//! Runs against a real MySQL endpoint named by `LOBSTERS_BENCH_MYSQL_URL`
//! (e.g. `mysql://root@127.0.0.1:3306/lobsters_it`); skips otherwise.
//! The test creates and drops `<db>_original`, `<db>_natural` and `<db>_vote`.

use lobsters_bench::cpu::{CpuArgs, CpuMeter};
use lobsters_bench::lobsters::load::{run_at, LoadConfig};
use lobsters_bench::lobsters::pages::{Page, World};
use lobsters_bench::lobsters::{check_variants, CheckPlan, Variant};
use lobsters_bench::{db, vote};
use mysql_async::prelude::Queryable;
use std::sync::Arc;
use std::time::Duration;

const SCALE: f64 = 0.005;

fn url() -> Option<String> {
    match std::env::var("LOBSTERS_BENCH_MYSQL_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("skipping: LOBSTERS_BENCH_MYSQL_URL is not set (e.g. mysql://root@127.0.0.1:3306/lobsters_it)");
            None
        }
    }
}

/// Story and front pages, interleaved with every kind of write so the
/// original variant's counters are exercised, agree across variants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_return_identical_story_and_frontpage_results() {
    let Some(url) = url() else { return };
    let mut plan = Vec::new();
    let writes = [
        Page::StoryUpvote,
        Page::CommentUpvote,
        Page::NewComment,
        Page::Submit,
        Page::Reply,
        Page::StoryDownvote,
        Page::CommentDownvote,
    ];
    for i in 0..120 {
        plan.push(Page::Story);
        plan.push(Page::Frontpage);
        plan.push(writes[i % writes.len()]);
        if i % 10 == 0 {
            plan.extend([Page::User, Page::Comments, Page::Recent, Page::Login]);
        }
    }
    let out = check_variants(&url, SCALE, 7, true, CheckPlan::Pages(plan.clone()))
        .await
        .unwrap();
    assert_eq!(out.requests, plan.len());
    // Every story page renders at least the story and its session lines.
    assert!(
        out.lines_compared > plan.len(),
        "only {} lines compared",
        out.lines_compared
    );
    assert!(out.mismatches.is_empty(), "{}", out.mismatches.join("\n"));

    // Both variants also survive a short open-loop run without errors.
    let (opts, db_name) = db::parse_url(&url).unwrap();
    for v in [Variant::Original, Variant::Natural] {
        let opts = db::with_db(&opts, Some(&format!("{db_name}_{}", v.name())));
        let mut conn = db::connect(&opts).await.unwrap();
        let world = Arc::new(World::load(&mut conn).await.unwrap());
        let cfg = LoadConfig {
            opts,
            variant: v,
            connections: 4,
            max_in_flight: 64,
            runtime: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
            logged_in_fraction: 0.5,
            seed: 3,
            cpu: CpuMeter::default(),
        };
        let r = run_at(&cfg, world, 20.0, 0).await.unwrap();
        assert_eq!(r.errors, 0, "{:?}: {:?}", v, r.first_error);
        assert!(r.all.count() > 0, "{v:?}: nothing completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_benchmark_runs() {
    let Some(url) = url() else { return };
    let (_, db_name) = db::parse_url(&url).unwrap();
    let vote_url = url.replacen(&format!("/{db_name}"), &format!("/{db_name}_vote"), 1);
    let args = vote::VoteArgs {
        url: vote_url,
        articles: 200,
        prime_votes: Some(400),
        read_fraction: 0.9,
        distribution: vote::Distribution::Zipf,
        zipf_s: 1.08,
        connections: 2,
        runtime: 2.0,
        warmup: 0.5,
        prime: true,
        seed: 1,
        json: None,
        queries: Variant::Natural,
        cpu: CpuArgs::default(),
    };
    for queries in [Variant::Natural, Variant::Original] {
        let args = vote::VoteArgs {
            queries,
            ..args.clone()
        };
        let rep = vote::run(&args).await.unwrap();
        assert_eq!(rep.errors, 0, "{queries:?}: {:?}", rep.first_error);
        assert!(rep.reads > 0 && rep.writes > 0, "{rep:?}");
        assert!(rep.client_cpu_ms_per_op.is_some(), "{rep:?}");
        assert!(!rep.windows.is_empty(), "{rep:?}");
    }
    // The original variant's counters agree with the votes after the run.
    let (opts, _) = db::parse_url(&args.url).unwrap();
    let mut conn = db::connect(&opts).await.unwrap();
    let counters: Vec<(i64, i64)> = conn
        .query("SELECT id, votes FROM Article WHERE votes > 0 ORDER BY id")
        .await
        .unwrap();
    let counted: Vec<(i64, i64)> = conn
        .query("SELECT article_id, COUNT(*) FROM Vote GROUP BY article_id ORDER BY article_id")
        .await
        .unwrap();
    assert_eq!(counters, counted);
}
