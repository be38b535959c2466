fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for _ in 0..n {
        let t = std::time::Instant::now();
        let l = tlsperf::trust::load(
            &tlsperf::trust::Source::System { root: None },
            &tlsperf::trust::LoadOptions::ANCHORS,
        )
        .unwrap();
        if n == 1 {
            println!("{:?} {:?}", t.elapsed(), l.times);
        }
    }
}
