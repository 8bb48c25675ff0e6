//! A blocking rtnetlink socket: one request at a time, acknowledged or dumped, with a
//! receive timeout so a kernel that never answers cannot hang a koordlet round.

use std::io;
use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// How long one answer may take.
const RECV_TIMEOUT_SECS: i64 = 2;

pub struct Rtnl {
    socket: Socket,
    seq: u32,
}

impl Rtnl {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        set_recv_timeout(&socket)?;
        Ok(Rtnl { socket, seq: 0 })
    }

    /// Sends a change and waits for the kernel's acknowledgement.
    pub fn request(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        let seq = self.send(msg, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        self.receive(seq, |_| ()).map(|_| ())
    }

    /// Sends a dump request; every message of the answer.
    pub fn dump(&mut self, msg: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        let seq = self.send(msg, NLM_F_REQUEST | NLM_F_DUMP)?;
        self.receive(seq, |m| m)
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0)?;
        Ok(self.seq)
    }

    /// Reads answers to `seq` until an acknowledgement, an error or the end of a dump.
    fn receive<T>(
        &mut self,
        seq: u32,
        mut each: impl FnMut(RouteNetlinkMessage) -> T,
    ) -> io::Result<Vec<T>> {
        let mut out = Vec::new();
        loop {
            let (buf, _) = self.socket.recv_from_full()?;
            let mut at = 0;
            while at < buf.len() {
                let packet = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[at..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = packet.header.length as usize;
                at += len.max(16).next_multiple_of(4);
                if packet.header.sequence_number != seq {
                    continue;
                }
                match packet.payload {
                    NetlinkPayload::InnerMessage(m) => out.push(each(m)),
                    NetlinkPayload::Error(e) if e.code.is_some() => return Err(e.to_io()),
                    NetlinkPayload::Error(_) | NetlinkPayload::Done(_) => return Ok(out),
                    _ => {}
                }
            }
        }
    }
}

fn set_recv_timeout(socket: &Socket) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: RECV_TIMEOUT_SECS,
        tv_usec: 0,
    };
    // SAFETY: a valid socket descriptor and a timeval of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
