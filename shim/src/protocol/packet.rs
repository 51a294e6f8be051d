//! Framing: each packet is a 3-byte little-endian payload length, a
//! sequence id, then the payload; a payload of 16 MiB - 1 bytes or more is
//! split into full-length packets followed by a shorter one (possibly
//! empty), which the reader joins back into one payload.
//!
//! The reader keeps what the socket delivered past the current packet for
//! the next call, so commands pipelined in one TCP write are each read
//! whole and in order. It checks `max_allowed_packet` from the headers,
//! before buffering a payload.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload of a single packet; a payload this long continues in
/// the next packet.
pub const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// How the stream of client packets broke.
#[derive(Debug)]
pub enum FrameError {
    /// The socket failed or closed in mid-packet.
    Io(io::Error),
    /// The (joined) payload exceeds `max_allowed_packet`; the error reply
    /// must carry `seq`.
    TooLarge { seq: u8 },
    /// A continuation packet carried the wrong sequence id.
    OutOfOrder { seq: u8 },
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> FrameError {
        FrameError::Io(e)
    }
}

/// One client payload, joined across continuation packets.
#[derive(Debug, PartialEq, Eq)]
pub struct Packet {
    /// The sequence id of the last packet it came in.
    pub seq: u8,
    pub payload: Vec<u8>,
}

pub struct PacketReader<R> {
    stream: R,
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out.
    consumed: usize,
    max_payload: usize,
}

impl<R: AsyncRead + Unpin> PacketReader<R> {
    pub fn new(stream: R, max_payload: usize) -> PacketReader<R> {
        PacketReader {
            stream,
            buf: Vec::with_capacity(16 * 1024),
            consumed: 0,
            max_payload,
        }
    }

    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.max_payload = max_payload;
    }

    /// Bytes already read from the socket and not yet handed out.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.consumed..]
    }

    /// Reads more bytes into `buf`; false at end of stream.
    async fn fill(&mut self, at_least: usize) -> io::Result<bool> {
        if self.consumed > 0 && (self.consumed == self.buf.len() || self.consumed >= 64 * 1024) {
            self.buf.drain(..self.consumed);
            self.consumed = 0;
        }
        self.buf.reserve(at_least.max(16 * 1024));
        Ok(self.stream.read_buf(&mut self.buf).await? > 0)
    }

    /// Waits until at least one byte of the next packet is here; false if
    /// the client closed the connection first. Cancel-safe (bytes read
    /// stay buffered), so an idle timeout can wrap it.
    pub async fn readable(&mut self) -> io::Result<bool> {
        if self.buf.len() > self.consumed {
            return Ok(true);
        }
        self.fill(1).await
    }

    /// Reads what the client sends ahead of the current reply (it stays
    /// buffered for the commands after); false once the client closed the
    /// connection. Cancel-safe.
    pub async fn read_ahead(&mut self) -> io::Result<bool> {
        self.fill(1).await
    }

    /// Makes at least `n` unconsumed bytes available; false if the stream
    /// ends first (with nothing of them read when `clean` is then true).
    async fn want(&mut self, n: usize) -> io::Result<bool> {
        while self.buf.len() - self.consumed < n {
            let missing = n - (self.buf.len() - self.consumed);
            if !self.fill(missing).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The next payload; `None` when the client closed the connection
    /// between packets.
    pub async fn next(&mut self) -> Result<Option<Packet>, FrameError> {
        let mut payload: Option<Vec<u8>> = None;
        let mut expect_seq: Option<u8> = None;
        loop {
            if !self.want(4).await? {
                if payload.is_none() && self.buf.len() == self.consumed {
                    return Ok(None);
                }
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            let h = &self.buf[self.consumed..self.consumed + 4];
            let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
            let seq = h[3];
            if let Some(expected) = expect_seq {
                if seq != expected {
                    return Err(FrameError::OutOfOrder { seq });
                }
            }
            let so_far = payload.as_ref().map_or(0, Vec::len);
            if so_far + len > self.max_payload {
                return Err(FrameError::TooLarge { seq });
            }
            if !self.want(4 + len).await? {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            let body = &self.buf[self.consumed + 4..self.consumed + 4 + len];
            let whole = match payload.take() {
                None if len < MAX_PAYLOAD => {
                    let p = body.to_vec();
                    self.consumed += 4 + len;
                    return Ok(Some(Packet { seq, payload: p }));
                }
                None => body.to_vec(),
                Some(mut p) => {
                    p.extend_from_slice(body);
                    p
                }
            };
            self.consumed += 4 + len;
            if len < MAX_PAYLOAD {
                return Ok(Some(Packet {
                    seq,
                    payload: whole,
                }));
            }
            payload = Some(whole);
            expect_seq = Some(seq.wrapping_add(1));
        }
    }
}

/// Collects a reply's packets in one buffer and writes it with as few
/// syscalls as possible.
pub struct PacketWriter<W> {
    stream: W,
    out: Vec<u8>,
    seq: u8,
}

/// Flush a reply in progress once this much is buffered.
pub const FLUSH_AT: usize = 256 * 1024;

impl<W: AsyncWrite + Unpin> PacketWriter<W> {
    pub fn new(stream: W) -> PacketWriter<W> {
        PacketWriter {
            stream,
            out: Vec::with_capacity(16 * 1024),
            seq: 0,
        }
    }

    /// The sequence id the next packet gets.
    pub fn seq(&self) -> u8 {
        self.seq
    }

    pub fn set_seq(&mut self, seq: u8) {
        self.seq = seq;
    }

    /// Starts a packet: the payload is then appended to the returned
    /// buffer, and [`PacketWriter::end_packet`] frames it.
    pub fn begin_packet(&mut self) -> usize {
        let start = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        start
    }

    /// The buffer a packet's payload is appended to.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Frames the packet begun at `start`, splitting a long payload.
    pub fn end_packet(&mut self, start: usize) {
        let len = self.out.len() - start - 4;
        if len < MAX_PAYLOAD {
            self.out[start..start + 3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
            self.out[start + 3] = self.seq;
            self.seq = self.seq.wrapping_add(1);
            return;
        }
        let payload = self.out.split_off(start + 4);
        self.out.truncate(start);
        let mut chunks = payload.chunks(MAX_PAYLOAD);
        let mut last_len = 0;
        for c in chunks.by_ref() {
            self.out
                .extend_from_slice(&(c.len() as u32).to_le_bytes()[..3]);
            self.out.push(self.seq);
            self.seq = self.seq.wrapping_add(1);
            self.out.extend_from_slice(c);
            last_len = c.len();
        }
        if last_len == MAX_PAYLOAD {
            self.out.extend_from_slice(&[0, 0, 0, self.seq]);
            self.seq = self.seq.wrapping_add(1);
        }
    }

    /// Writes one whole packet.
    pub fn packet(&mut self, payload: &[u8]) {
        let start = self.begin_packet();
        self.out.extend_from_slice(payload);
        self.end_packet(start);
    }

    pub fn buffered_len(&self) -> usize {
        self.out.len()
    }

    /// Sends what is buffered.
    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
        }
        self.stream.flush().await
    }

    /// Sends what is buffered if it has grown large (long results go out in
    /// chunks rather than all in memory).
    pub async fn flush_if_large(&mut self) -> io::Result<()> {
        if self.out.len() >= FLUSH_AT {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
        }
        Ok(())
    }

    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }

    /// Gives back the stream (for the TLS switch); nothing may be buffered.
    pub fn into_inner(self) -> W {
        self.stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(payload);
        p
    }

    async fn read_all(bytes: Vec<u8>, max: usize) -> Vec<Result<Option<Packet>, String>> {
        let mut r = PacketReader::new(&bytes[..], max);
        let mut out = Vec::new();
        loop {
            match r.next().await {
                Ok(Some(p)) => out.push(Ok(Some(p))),
                Ok(None) => {
                    out.push(Ok(None));
                    return out;
                }
                Err(e) => {
                    out.push(Err(format!("{e:?}")));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn pipelined_packets_are_each_read() {
        let mut bytes = frame(0, b"\x03SELECT 1");
        bytes.extend(frame(0, &[0x0e]));
        bytes.extend(frame(0, &vec![b'x'; 70_000]));
        let got = read_all(bytes, 1 << 20).await;
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[1],
            Ok(Some(Packet {
                seq: 0,
                payload: vec![0x0e]
            }))
        );
        assert_eq!(got[3], Ok(None));
    }

    #[tokio::test]
    async fn long_payloads_join_and_split() {
        let payload: Vec<u8> = (0..MAX_PAYLOAD * 2 + 5).map(|i| i as u8).collect();
        let mut w = PacketWriter::new(Vec::new());
        w.packet(&payload);
        w.packet(&vec![7; MAX_PAYLOAD]);
        w.flush().await.unwrap();
        let bytes = w.into_inner();
        let got = read_all(bytes, 64 << 20).await;
        let Ok(Some(p)) = &got[0] else { panic!() };
        assert_eq!(p.payload, payload);
        assert_eq!(p.seq, 2);
        let Ok(Some(p)) = &got[1] else { panic!() };
        assert_eq!(p.payload.len(), MAX_PAYLOAD);
        assert_eq!(p.seq, 4, "a trailing empty packet follows a full one");
        assert_eq!(got[2], Ok(None));
    }

    #[tokio::test]
    async fn limits_and_bad_framing_are_errors() {
        let got = read_all(frame(0, &[1; 100]), 99).await;
        assert!(got[0].as_ref().unwrap_err().contains("TooLarge"));
        let mut bytes = frame(0, &vec![1; MAX_PAYLOAD]);
        bytes.extend(frame(5, b"x"));
        let got = read_all(bytes, 64 << 20).await;
        assert!(got[0].as_ref().unwrap_err().contains("OutOfOrder"));
        let got = read_all(vec![5, 0, 0, 0, 1], 100).await;
        assert!(got[0].as_ref().unwrap_err().contains("UnexpectedEof"));
    }
}
