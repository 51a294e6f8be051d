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
        also_urls: Vec::new(),
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

/// A vote run whose node goes away mid-run (a proxy in front of the
/// endpoint closes every connection and stops listening, as a killed
/// cluster node does) moves those connections to the next node
/// (`--also-url`: here the endpoint itself) and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_connections_move_to_the_next_node_when_theirs_goes_away() {
    let Some(url) = url() else { return };
    let (opts, db_name) = db::parse_url(&url).unwrap();
    // Its own database (the other vote test primes `<db>_vote` meanwhile);
    // TCP only: a client that moved to the server's Unix socket would not
    // notice the proxy go away.
    let direct = url.replacen(&format!("/{db_name}"), &format!("/{db_name}_vote_moves"), 1);
    let direct = if direct.contains('?') {
        format!("{direct}&prefer_socket=false")
    } else {
        format!("{direct}?prefer_socket=false")
    };
    let endpoint = format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxied = direct.replacen(
        &endpoint,
        &format!("127.0.0.1:{}", listener.local_addr().unwrap().port()),
        1,
    );
    assert_ne!(proxied, direct);
    let (cut_tx, cut_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut cut = cut_rx.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((mut client, _)) = accepted else { return };
                    let (endpoint, mut cut) = (endpoint.clone(), cut_rx.clone());
                    tokio::spawn(async move {
                        let Ok(mut server) = tokio::net::TcpStream::connect(&endpoint).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut.wait_for(|c| *c) => {}
                        }
                    });
                }
                // Returning drops the listener: the port refuses.
                _ = cut.wait_for(|c| *c) => return,
            }
        }
    });
    let args = vote::VoteArgs {
        url: direct.clone(),
        articles: 200,
        prime_votes: Some(400),
        read_fraction: 0.5,
        distribution: vote::Distribution::Uniform,
        zipf_s: 1.08,
        connections: 4,
        runtime: 0.5,
        warmup: 0.0,
        prime: true,
        seed: 1,
        json: None,
        also_urls: Vec::new(),
        queries: Variant::Natural,
        cpu: CpuArgs::default(),
    };
    vote::run(&args).await.unwrap();
    // Connections 0 and 2 start on the proxy, 1 and 3 on the endpoint.
    let args = vote::VoteArgs {
        url: proxied,
        also_urls: vec![direct],
        prime: false,
        runtime: 3.0,
        ..args
    };
    let run = tokio::spawn(async move { vote::run(&args).await });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    cut_tx.send(true).unwrap();
    let rep = run.await.unwrap().unwrap();
    assert!(rep.reconnects >= 2, "{rep:?}");
    // One error per lost connection (the operation in flight), no more.
    assert!(rep.errors <= 2, "{rep:?}");
    assert!(rep.reads > 0 && rep.writes > 0, "{rep:?}");
}
