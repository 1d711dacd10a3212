//! The verifier on our schedules (exhaustive for small p, around powers of two up to 2^20, random
//! p up to 2^20) and its own negative tests.

use circulant_core::schedule::verify::{
    block_counts, verify, verify_rows, verify_with_threads, Violation,
};
use circulant_core::schedule::ScheduleTable;

fn check(p: usize) {
    let table = ScheduleTable::with_threads(p, 2).unwrap();
    let ns = block_counts(table.q());
    if let Err(v) = verify_with_threads(p, table.recv_flat(), table.send_flat(), &ns, 2) {
        panic!("p = {p}: {v}");
    }
}

#[test]
fn every_p_up_to_2048() {
    // Two workers, p interleaved.
    std::thread::scope(|s| {
        for w in 0..2 {
            s.spawn(move || (1 + w..=2048).step_by(2).for_each(check));
        }
    });
}

#[test]
fn around_powers_of_two_up_to_2_pow_20() {
    for k in 1..=20 {
        for p in [(1usize << k) - 1, 1 << k, (1 << k) + 1] {
            check(p);
        }
    }
}

#[test]
fn random_p_up_to_2_pow_20() {
    // A fixed xorshift sequence, so a failure is reproducible.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..6 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        check(2049 + (state % ((1 << 20) - 2049)) as usize);
    }
}

#[test]
fn p_1_is_trivially_complete() {
    assert_eq!(verify(1, &[], &[], &[1, 5]), Ok(()));
    assert_eq!(verify_rows(&[vec![]], &[vec![]], &[3]), Ok(()));
}

/// Small p with their rank-major rows.
fn rows(p: usize) -> (Vec<Vec<i32>>, Vec<Vec<i32>>) {
    let t = ScheduleTable::new(p).unwrap();
    let recv = (0..p).map(|r| t.recv(r).to_vec()).collect();
    let send = (0..p).map(|r| t.send(r).to_vec()).collect();
    (recv, send)
}

const SMALL_P: [usize; 12] = [2, 3, 4, 5, 7, 9, 17, 20, 31, 32, 33, 100];

#[test]
fn rejects_any_single_changed_entry() {
    for p in SMALL_P {
        let (recv, send) = rows(p);
        let q = recv[0].len() as i32;
        let ns = block_counts(q as usize);
        assert_eq!(verify_rows(&recv, &send, &ns), Ok(()));
        for which in 0..2 {
            for r in 0..p {
                for k in 0..q as usize {
                    for value in -q - 1..=q {
                        let (mut recv, mut send) = (recv.clone(), send.clone());
                        let row = if which == 0 {
                            &mut recv[r]
                        } else {
                            &mut send[r]
                        };
                        if row[k] == value {
                            continue;
                        }
                        row[k] = value;
                        assert!(
                            verify_rows(&recv, &send, &ns).is_err(),
                            "p = {p}: {} [{r}][{k}] = {value} accepted",
                            ["recv", "send"][which]
                        );
                    }
                }
            }
        }
    }
}

/// A slow, literal Alg. 6 for every n in 1..=4q + 4 with per-rank sets of held blocks: true if
/// every send is of a held block and every rank ends with all blocks.
fn naive_valid(recv: &[Vec<i32>], send: &[Vec<i32>]) -> bool {
    let p = recv.len();
    let skips = circulant_core::schedule::Skips::new(p).unwrap();
    let q = skips.q();
    (1..=4 * q + 4).all(|n| {
        let mut held: Vec<std::collections::BTreeSet<i64>> = vec![Default::default(); p];
        held[0] = (0..n as i64).collect();
        let (mut r_now, mut s_now) = (recv.to_vec(), send.to_vec());
        let x = (q - (n - 1) % q) % q;
        for r in 0..p {
            for k in 0..q {
                let shift = if k < x {
                    q as i32 - x as i32
                } else {
                    -(x as i32)
                };
                r_now[r][k] += shift;
                s_now[r][k] += shift;
            }
        }
        for i in x..x + n + q - 1 {
            let k = i % q;
            let mut arrivals = vec![];
            for r in 0..p {
                let t = (r + skips.get(k)) % p;
                let b = s_now[r][k] as i64;
                if t != 0 && b >= 0 {
                    let b = b.min(n as i64 - 1);
                    if !held[r].contains(&b) || (r_now[t][k] as i64).min(n as i64 - 1) != b {
                        return false;
                    }
                    arrivals.push((t, b));
                }
            }
            for (t, b) in arrivals {
                held[t].insert(b);
            }
            for r in 0..p {
                r_now[r][k] += q as i32;
                s_now[r][k] += q as i32;
            }
        }
        held.iter().all(|h| h.len() == n)
    })
}

/// Changing a receive entry together with the send entry that feeds it keeps agreement. Such a
/// pair must fail possession or completeness, unless it is again a valid schedule (schedules
/// are not unique, e.g. a block of the previous phase received one phase early): the verifier's
/// verdict must match a slow literal simulation over many more block counts.
#[test]
fn consistent_pair_changes_agree_with_a_literal_simulation() {
    let (mut rejected, mut alternatives) = (0usize, 0usize);
    for p in SMALL_P.into_iter().filter(|&p| p <= 33) {
        let (recv, send) = rows(p);
        let q = recv[0].len();
        let ns = block_counts(q);
        let skips = circulant_core::schedule::Skips::new(p).unwrap();
        for t in 1..p {
            for k in 0..q {
                let from = (t + p - skips.get(k)) % p;
                for value in -(q as i32)..q as i32 {
                    if recv[t][k] == value {
                        continue;
                    }
                    let (mut recv, mut send) = (recv.clone(), send.clone());
                    recv[t][k] = value;
                    send[from][k] = value;
                    let verdict = verify_rows(&recv, &send, &ns);
                    assert!(
                        !matches!(
                            verdict,
                            Err(Violation::Agreement { .. } | Violation::Shape { .. })
                        ),
                        "p = {p}: {verdict:?}"
                    );
                    assert_eq!(
                        verdict.is_ok(),
                        naive_valid(&recv, &send),
                        "p = {p}: recv[{t}][{k}] = {value}: {verdict:?}"
                    );
                    if verdict.is_ok() {
                        alternatives += 1;
                    } else {
                        rejected += 1;
                    }
                }
            }
        }
    }
    assert!(
        rejected > 10 * alternatives,
        "{rejected} rejected, {alternatives} valid"
    );
}

#[test]
fn shape_errors() {
    let (recv, mut send) = rows(9);
    send.pop();
    assert!(matches!(
        verify_rows(&recv, &send, &[1]),
        Err(Violation::Shape { .. })
    ));
    assert!(matches!(
        verify(9, &[0; 3], &[0; 3], &[1]),
        Err(Violation::Shape { .. })
    ));
    assert_eq!(verify(0, &[], &[], &[1]), Err(Violation::ZeroRanks));
}
