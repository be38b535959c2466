//! A TCP relay on 127.0.0.1 that passes client→server bytes at once and delays every
//! server→client byte by a fixed `delay` (a one-way delay line): a server whose delay the
//! test controls, for checking where the client's phase boundaries fall.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running relay; it stops accepting when dropped (connections in flight finish).
pub struct DelayRelay {
    /// The port clients connect to.
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl DelayRelay {
    /// Relays 127.0.0.1:<port> to 127.0.0.1:`upstream`, delaying server→client bytes by
    /// `delay`.
    pub fn start(upstream: u16, delay: Duration) -> DelayRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                relay(client, server, delay);
            }
        });
        DelayRelay { port, stop }
    }
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn relay(client: TcpStream, server: TcpStream, delay: Duration) {
    // Client → server: at once.
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match c_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    // Server → client: each chunk leaves `delay` after it arrived (None: end of stream).
    let (tx, rx) = mpsc::channel::<(Instant, Option<Vec<u8>>)>();
    let mut s_read = server;
    thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match s_read.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send((Instant::now() + delay, None));
                    break;
                }
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, Some(buf[..n].to_vec())))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    let mut c_write = client;
    thread::spawn(move || {
        while let Ok((due, chunk)) = rx.recv() {
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            match chunk {
                Some(bytes) => {
                    if c_write.write_all(&bytes).is_err() {
                        break;
                    }
                }
                None => break,
            }
        }
        let _ = c_write.shutdown(Shutdown::Both);
    });
}
