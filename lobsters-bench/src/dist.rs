//! Random generators shared by both workloads: a Zipf sampler, Poisson
//! inter-arrival times and a weighted categorical choice.

use rand::Rng;

/// Zipf distribution over ranks `1..=n` with exponent `s`: rank `k` is drawn
/// with probability proportional to `1 / k^s`.
///
/// Rejection-inversion sampling (Hörmann and Derflinger, 1996): O(1) per
/// sample and O(1) set-up, so it works for millions of items.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    threshold: f64,
}

impl Zipf {
    /// A sampler over `1..=n`. Returns `None` when `n == 0` or `s` is not a
    /// positive finite number.
    pub fn new(n: u64, s: f64) -> Option<Zipf> {
        if n == 0 || !(s.is_finite() && s > 0.0) {
            return None;
        }
        let n = n as f64;
        let h_integral_x1 = h_integral(1.5, s) - 1.0;
        let h_integral_n = h_integral(n + 0.5, s);
        let threshold = 2.0 - h_integral_inverse(h_integral(2.5, s) - h(2.0, s), s);
        Some(Zipf {
            n,
            s,
            h_integral_x1,
            h_integral_n,
            threshold,
        })
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.n as u64
    }

    /// Always false: a sampler has at least one rank.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Draws a rank in `1..=n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        loop {
            let u = self.h_integral_n + rng.gen::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = h_integral_inverse(u, self.s);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.threshold || u >= h_integral(k + 0.5, self.s) - h(k, self.s) {
                return k as u64;
            }
        }
    }

    /// Draws a zero-based index in `0..n`.
    pub fn sample_index<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.sample(rng) - 1
    }
}

fn h(x: f64, s: f64) -> f64 {
    (-s * x.ln()).exp()
}

fn h_integral(x: f64, s: f64) -> f64 {
    let log_x = x.ln();
    helper2((1.0 - s) * log_x) * log_x
}

fn h_integral_inverse(x: f64, s: f64) -> f64 {
    let mut t = x * (1.0 - s);
    if t < -1.0 {
        t = -1.0;
    }
    (helper1(t) * x).exp()
}

/// `ln(1 + x) / x`, accurate near zero.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, accurate near zero.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// Seconds until the next arrival of a Poisson process with `rate` arrivals
/// per second (exponentially distributed gaps).
pub fn exp_interarrival<R: Rng + ?Sized>(rng: &mut R, rate: f64) -> f64 {
    // 1 - U lies in (0, 1], so the logarithm is finite.
    let u: f64 = 1.0 - rng.gen::<f64>();
    -u.ln() / rate
}

/// A categorical distribution over items with integer weights.
#[derive(Debug, Clone)]
pub struct Weighted<T> {
    items: Vec<T>,
    cumulative: Vec<u64>,
}

impl<T: Copy> Weighted<T> {
    /// Builds the distribution; items with weight 0 are never drawn.
    /// Returns `None` when the weights add up to zero.
    pub fn new(pairs: &[(T, u64)]) -> Option<Weighted<T>> {
        let mut total = 0;
        let mut cumulative = Vec::with_capacity(pairs.len());
        for &(_, w) in pairs {
            total += w;
            cumulative.push(total);
        }
        if total == 0 {
            return None;
        }
        Some(Weighted {
            items: pairs.iter().map(|p| p.0).collect(),
            cumulative,
        })
    }

    /// Sum of all weights.
    pub fn total(&self) -> u64 {
        *self.cumulative.last().unwrap_or(&0)
    }

    /// Draws one item.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> T {
        let x = rng.gen_range(0..self.total());
        let i = self.cumulative.partition_point(|&c| c <= x);
        self.items[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn zipf_stays_in_range_and_ranks_follow_power_law() {
        let mut rng = StdRng::seed_from_u64(7);
        for &s in &[0.5, 1.0, 1.2] {
            let z = Zipf::new(1000, s).unwrap();
            let mut counts = vec![0u64; 1001];
            let draws = 400_000;
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=1000).contains(&k));
                counts[k as usize] += 1;
            }
            // P(1) / P(2) = 2^s and P(1) / P(4) = 4^s.
            let r12 = counts[1] as f64 / counts[2] as f64;
            let r14 = counts[1] as f64 / counts[4] as f64;
            assert!((r12 / 2f64.powf(s) - 1.0).abs() < 0.05, "s={s} r12={r12}");
            assert!((r14 / 4f64.powf(s) - 1.0).abs() < 0.08, "s={s} r14={r14}");
            // Expected share of rank 1: 1 / H(n, s).
            let harmonic: f64 = (1..=1000).map(|k| 1.0 / (k as f64).powf(s)).sum();
            let share = counts[1] as f64 / draws as f64;
            assert!((share * harmonic - 1.0).abs() < 0.05, "s={s} share={share}");
        }
    }

    #[test]
    fn zipf_rejects_bad_parameters_and_handles_one_item() {
        assert!(Zipf::new(0, 1.0).is_none());
        assert!(Zipf::new(10, 0.0).is_none());
        assert!(Zipf::new(10, f64::NAN).is_none());
        let z = Zipf::new(1, 1.1).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        assert!((0..100).all(|_| z.sample(&mut rng) == 1));
    }

    #[test]
    fn poisson_arrivals_have_the_requested_mean_rate() {
        let mut rng = StdRng::seed_from_u64(3);
        for &rate in &[0.5, 46.0, 5000.0] {
            let n = 200_000;
            let total: f64 = (0..n).map(|_| exp_interarrival(&mut rng, rate)).sum();
            let measured = n as f64 / total;
            assert!(
                (measured / rate - 1.0).abs() < 0.01,
                "rate={rate} measured={measured}"
            );
        }
    }

    #[test]
    fn weighted_choice_matches_weights() {
        let w = Weighted::new(&[('a', 1), ('b', 0), ('c', 3)]).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        let mut counts = [0u32; 3];
        for _ in 0..100_000 {
            match w.sample(&mut rng) {
                'a' => counts[0] += 1,
                'b' => counts[1] += 1,
                _ => counts[2] += 1,
            }
        }
        assert_eq!(counts[1], 0);
        let ratio = counts[2] as f64 / counts[0] as f64;
        assert!((ratio / 3.0 - 1.0).abs() < 0.05, "{ratio}");
        assert!(Weighted::<u8>::new(&[(1, 0)]).is_none());
    }
}
