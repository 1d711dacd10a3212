//! The forms of every collective, made from its row of the table of collectives
//! ([`super::table`]): blocking (`bcast`), nonblocking (`ibcast`, a [`Request`]) and
//! persistent (`bcast_init`, a [`Persistent`] on registered buffers), each on the
//! communicator (the automatic choice) and on [`Using`] (a forced algorithm). The reductions
//! also have untyped forms over a [`Reduction`] (`allreduce_bytes`, …).
//!
//! A row names the forms, the buffers (`none`; `buf`, read at the root and written
//! elsewhere; `recv`, in place; `send recv`; `typed`, a reduction's send and receive
//! elements), the other arguments, and the call they make ([`super::calls`]).

use crate::plan::{ReduceOp, Reduction};

use super::buffer::typed;
use super::buffer::{Buffer, Element, Payload, PayloadMut};
use super::call::Choice;
use super::calls::Lengths;
use super::communicator::Communicator;
use super::error::Result;
use super::memory::Memory;
use super::persistent::Persistent;
use super::registry::ALL;
use super::request::Request;

/// A communicator with the algorithm of one call chosen: `comm.using(name).bcast(…)` runs
/// the broadcast with algorithm `name` (a name of [`Communicator::algorithms`]), or fails
/// where `name` does not apply to the call.
#[derive(Debug)]
pub struct Using<'c, 'n> {
    comm: &'c mut Communicator,
    choice: Choice<'n>,
}

impl Communicator {
    /// The next call with algorithm `algorithm` forced (see [`Using`]).
    pub fn using<'c, 'n>(&'c mut self, algorithm: &'n str) -> Using<'c, 'n> {
        self.choosing(Choice::Named(algorithm))
    }

    /// The next call with `choice`: [`Choice::Auto`] as the communicator's own forms,
    /// [`Choice::Named`] as [`Self::using`].
    pub fn choosing<'c, 'n>(&'c mut self, choice: Choice<'n>) -> Using<'c, 'n> {
        Using { comm: self, choice }
    }
}

/// The lengths of a call's buffers.
fn lengths(send: Option<&[u8]>, recv: Option<&[u8]>) -> Lengths {
    Lengths {
        send: send.map_or(0, <[u8]>::len),
        recv: recv.map_or(0, <[u8]>::len),
    }
}

/// The forms of each row, on the communicator and on [`Using`].
macro_rules! forms {
    ($($(#[doc = $doc:expr])* $name:ident, $iname:ident, $init:ident $(/ $bytes:ident, $ibytes:ident, $init_bytes:ident)?:
        $shape:ident ($($arg:ident: $ty:ty),*) => |$comm:ident, $len:ident, $choice:ident $(, $reduction:ident)?| $make:expr;
        $(@c $cdoc:literal ($($cp:ident: $ct:ty),*) => |$cc:ident| $cmake:expr;)?
        $(@mpi $mstem:ident $mshape:ident;)?)*) => {
        impl Communicator {
            $(forms!(@$shape [$(#[doc = $doc])*] $name, $iname, $init $(/ $bytes, $ibytes, $init_bytes)?;
                ($($arg: $ty),*) |$comm, $len, $choice $(, $reduction)?| $make;
                [&mut self] [self] [self] [&'a mut self] ['a,] 'a [&'c mut self] ['c,] 'c Choice::Auto);)*
        }
        impl<'c> Using<'c, '_> {
            $(forms!(@$shape [$(#[doc = $doc])* #[doc = ""] #[doc = "With the algorithm chosen."]]
                $name, $iname, $init $(/ $bytes, $ibytes, $init_bytes)?;
                ($($arg: $ty),*) |$comm, $len, $choice $(, $reduction)?| $make;
                [self] [self.comm] [self] [self] [] 'c [self] [] 'c self.choice);)*
        }
    };

    (@none [$($doc:tt)*] $name:ident, $iname:ident, $init:ident;
        ($($arg:ident: $ty:ty),*) |$comm:ident, $len:ident, $choice:ident| $make:expr;
        [$($recv:tt)*] [$site:expr] [$me:tt] [$($recv_i:tt)*] [$($gen_i:tt)*] $a:lifetime
        [$($recv_init:tt)*] [$($gen_init:tt)*] $c:lifetime $chosen:expr) => {
        $($doc)*
        pub fn $name($($recv)*, $($arg: $ty),*) -> Result<()> {
            let ($len, $choice) = (lengths(None, None), $chosen);
            let $comm = &*$site;
            let call = $make;
            ALL.run($site, call, Memory::default())
        }

        /// Starts the blocking form and returns its [`Request`].
        pub fn $iname<$($gen_i)*>($($recv_i)*, $($arg: $ty),*) -> Result<Request<$a>> {
            let ($len, $choice) = (lengths(None, None), $chosen);
            let $comm = &*$site;
            let call = $make;
            Request::start($site, ALL, call, Memory::default())
        }

        /// The persistent form: set up once, started many times.
        pub fn $init<$($gen_init)*>($($recv_init)*, $($arg: $ty),*) -> Result<Persistent<$c, 'static>> {
            let ($len, $choice) = (lengths(None, None), $chosen);
            let $comm = &*$site;
            let call = $make;
            Persistent::new($site, ALL, call, None, None)
        }
    };

    (@one $buf:ident [$($doc:tt)*] $name:ident, $iname:ident, $init:ident;
        ($($arg:ident: $ty:ty),*) |$comm:ident, $len:ident, $choice:ident| $make:expr;
        [$($recv:tt)*] [$site:expr] [$me:tt] [$($recv_i:tt)*] [$($gen_i:tt)*] $a:lifetime
        [$($recv_init:tt)*] [$($gen_init:tt)*] $c:lifetime $chosen:expr) => {
        $($doc)*
        pub fn $name<B: PayloadMut + ?Sized>($($recv)*, $buf: &mut B, $($arg: $ty),*) -> Result<()> {
            let ($len, $choice) = (lengths(None, Some($buf.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            ALL.run($site, call, Memory::of::<[u8], B>(None, Some($buf)))
        }

        /// Starts the blocking form and returns its [`Request`].
        pub fn $iname<$($gen_i)* B: PayloadMut + ?Sized>(
            $($recv_i)*,
            $buf: &$a mut B,
            $($arg: $ty),*
        ) -> Result<Request<$a>> {
            let ($len, $choice) = (lengths(None, Some($buf.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Request::start($site, ALL, call, Memory::of::<[u8], B>(None, Some($buf)))
        }

        /// The persistent form on a registered buffer: set up once, started many times.
        pub fn $init<$($gen_init)* 'b>(
            $($recv_init)*,
            $buf: &'b mut Buffer,
            $($arg: $ty),*
        ) -> Result<Persistent<$c, 'b>> {
            let ($len, $choice) = (lengths(None, Some($buf.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Persistent::new($site, ALL, call, Some($buf), None)
        }
    };

    (@buf $($rest:tt)*) => {
        forms!(@one buf $($rest)*);
    };

    (@recv $($rest:tt)*) => {
        forms!(@one recv $($rest)*);
    };

    (@send_recv [$($doc:tt)*] $name:ident, $iname:ident, $init:ident;
        ($($arg:ident: $ty:ty),*) |$comm:ident, $len:ident, $choice:ident| $make:expr;
        [$($recv:tt)*] [$site:expr] [$me:tt] [$($recv_i:tt)*] [$($gen_i:tt)*] $a:lifetime
        [$($recv_init:tt)*] [$($gen_init:tt)*] $c:lifetime $chosen:expr) => {
        $($doc)*
        pub fn $name<S, R>($($recv)*, send: &S, recv: &mut R, $($arg: $ty),*) -> Result<()>
        where
            S: Payload + ?Sized,
            R: PayloadMut + ?Sized,
        {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            ALL.run($site, call, Memory::of(Some(send), Some(recv)))
        }

        /// Starts the blocking form and returns its [`Request`].
        pub fn $iname<$($gen_i)* S, R>(
            $($recv_i)*,
            send: &$a S,
            recv: &$a mut R,
            $($arg: $ty),*
        ) -> Result<Request<$a>>
        where
            S: Payload + ?Sized,
            R: PayloadMut + ?Sized,
        {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Request::start($site, ALL, call, Memory::of(Some(send), Some(recv)))
        }

        /// The persistent form on registered buffers: set up once, started many times (both
        /// buffers stay with the request: [`Persistent::send_buffer_mut`],
        /// [`Persistent::buffer`]).
        pub fn $init<$($gen_init)* 'b>(
            $($recv_init)*,
            send: &'b mut Buffer,
            recv: &'b mut Buffer,
            $($arg: $ty),*
        ) -> Result<Persistent<$c, 'b>> {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Persistent::new($site, ALL, call, Some(recv), Some(send))
        }
    };

    (@typed [$($doc:tt)*] $name:ident, $iname:ident, $init:ident / $bytes:ident, $ibytes:ident, $init_bytes:ident;
        ($($arg:ident: $ty:ty),*) |$comm:ident, $len:ident, $choice:ident, $reduction:ident| $make:expr;
        [$($recv:tt)*] [$site:expr] [$me:tt] [$($recv_i:tt)*] [$($gen_i:tt)*] $a:lifetime
        [$($recv_init:tt)*] [$($gen_init:tt)*] $c:lifetime $chosen:expr) => {
        $($doc)*
        pub fn $name<T: Element>($($recv)*, send: &[T], recv: &mut [T], op: ReduceOp, $($arg: $ty),*) -> Result<()> {
            let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            $me.$bytes::<[u8], [u8]>(send, recv, typed::<T>(op), $($arg),*)
        }

        /// The untyped form: the elements and operator of `reduction`, on any memory.
        pub fn $bytes<S, R>($($recv)*, send: &S, recv: &mut R, $reduction: Reduction, $($arg: $ty),*) -> Result<()>
        where
            S: Payload + ?Sized,
            R: PayloadMut + ?Sized,
        {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            ALL.run($site, call, Memory::of(Some(send), Some(recv)))
        }

        /// Starts the blocking form and returns its [`Request`].
        pub fn $iname<$($gen_i)* T: Element>(
            $($recv_i)*,
            send: &$a [T],
            recv: &$a mut [T],
            op: ReduceOp,
            $($arg: $ty),*
        ) -> Result<Request<$a>> {
            let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            $me.$ibytes::<[u8], [u8]>(send, recv, typed::<T>(op), $($arg),*)
        }

        /// Starts the untyped form and returns its [`Request`].
        pub fn $ibytes<$($gen_i)* S, R>(
            $($recv_i)*,
            send: &$a S,
            recv: &$a mut R,
            $reduction: Reduction,
            $($arg: $ty),*
        ) -> Result<Request<$a>>
        where
            S: Payload + ?Sized,
            R: PayloadMut + ?Sized,
        {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Request::start($site, ALL, call, Memory::of(Some(send), Some(recv)))
        }

        /// The persistent form on registered buffers holding elements of `T`: set up once,
        /// started many times.
        pub fn $init<$($gen_init)* 'b, T: Element>(
            $($recv_init)*,
            send: &'b mut Buffer,
            recv: &'b mut Buffer,
            op: ReduceOp,
            $($arg: $ty),*
        ) -> Result<Persistent<$c, 'b>> {
            $me.$init_bytes(send, recv, typed::<T>(op), $($arg),*)
        }

        /// The untyped persistent form.
        pub fn $init_bytes<$($gen_init)* 'b>(
            $($recv_init)*,
            send: &'b mut Buffer,
            recv: &'b mut Buffer,
            $reduction: Reduction,
            $($arg: $ty),*
        ) -> Result<Persistent<$c, 'b>> {
            let ($len, $choice) = (lengths(Some(send.bytes()), Some(recv.bytes())), $chosen);
            let $comm = &*$site;
            let call = $make;
            Persistent::new($site, ALL, call, Some(recv), Some(send))
        }
    };

}

super::table::collectives!(forms);
