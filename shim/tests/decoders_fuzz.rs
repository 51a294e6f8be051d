//! Property tests standing in for a fuzzer (cargo-fuzz needs a nightly
//! toolchain): arbitrary bytes, split arbitrarily, through the packet
//! framing and every client-message decoder. Nothing may panic; framing
//! must hand out exactly the packets a well-formed stream holds.

use std::pin::Pin;
use std::task::{Context, Poll};

use ladle_shim::protocol::handshake::{ChangeUser, HandshakeResponse};
use ladle_shim::protocol::packet::{FrameError, PacketReader, PacketWriter};
use ladle_shim::protocol::stmt::{self, Statement};
use proptest::prelude::*;
use tokio::io::{AsyncRead, ReadBuf};

/// Delivers `bytes` in pieces of the given sizes (cycled).
struct Chunked {
    bytes: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        let size = me.sizes[me.turn % me.sizes.len()].max(1);
        me.turn += 1;
        let n = size.min(me.bytes.len() - me.at).min(buf.remaining());
        buf.put_slice(&me.bytes[me.at..me.at + n]);
        me.at += n;
        Poll::Ready(Ok(()))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Every payload the reader yields, then how it stopped.
fn read_all(bytes: Vec<u8>, sizes: Vec<usize>, limit: usize) -> (Vec<Vec<u8>>, Option<String>) {
    runtime().block_on(async move {
        let mut r = PacketReader::new(
            Chunked {
                bytes,
                at: 0,
                sizes,
                turn: 0,
            },
            limit,
        );
        let mut out = Vec::new();
        loop {
            match r.next().await {
                Ok(Some(p)) => out.push(p.payload),
                Ok(None) => return (out, None),
                Err(FrameError::Io(e)) => return (out, Some(e.kind().to_string())),
                Err(e) => return (out, Some(format!("{e:?}"))),
            }
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn framing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                            sizes in proptest::collection::vec(1usize..64, 1..8),
                            limit in 0usize..300) {
        let _ = read_all(bytes, sizes, limit);
    }

    #[test]
    fn framed_payloads_come_back_whole_however_split(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..6),
        sizes in proptest::collection::vec(1usize..50, 1..8),
    ) {
        let bytes = runtime().block_on(async {
            let mut w = PacketWriter::new(Vec::new());
            for p in &payloads {
                w.set_seq(0);
                w.packet(p);
            }
            w.flush().await.unwrap();
            w.into_inner()
        });
        let (got, end) = read_all(bytes, sizes, 1 << 20);
        prop_assert_eq!(got, payloads);
        prop_assert_eq!(end, None);
    }

    #[test]
    fn command_decoders_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..200),
                                    params in 0usize..6,
                                    caps in any::<u32>(),
                                    bound in proptest::option::of(proptest::collection::vec((any::<u8>(), any::<bool>()), 0..6))) {
        let _ = HandshakeResponse::parse(&payload);
        let _ = HandshakeResponse::is_ssl_request(&payload);
        let _ = ChangeUser::parse(&payload, caps);
        let _ = stmt::long_data(&payload);
        let _ = stmt::statement_id(&payload);
        let mut s = Statement { params, param_types: bound, ..Statement::default() };
        let _ = stmt::execute_params(&payload, &mut s);
        if let Ok(text) = ladle_shim::sqltext::from_bytes(&payload) {
            if let Ok(valid) = std::str::from_utf8(&payload) {
                prop_assert_eq!(&*text, valid);
            }
        }
    }
}
