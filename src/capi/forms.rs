//! The C entry points of every collective, made from its row of the table of collectives
//! (`crate::comm`'s `table.rs`): `circulant_NAME` (blocking), `circulant_iNAME` (a request,
//! started) and `circulant_NAME_init` (a persistent request, set up once and started by
//! `circulant_start`). Each builds its [`Collective`] from its C arguments, as far as they can
//! be checked without the communicator, and runs it ([`blocking`], [`nonblocking`],
//! [`persistent`]). [`C_FORMS`] describes them for the header and the Fortran module, which
//! are generated from it (`ci/header`).

use std::ffi::{c_int, c_void};

use super::collective::{rank_arg, Collective, Reducing};
use super::collectives::blocking;
use super::handle::Comm;
use super::requests::{nonblocking, persistent, Pending};
use super::status::Outcome;

/// One C entry point as the header declares it.
#[derive(Clone, Copy, Debug)]
pub struct CForm {
    /// The function's name (`circulant_bcast`).
    pub name: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// Its arguments after the communicator: name and Rust type (`*mut c_void`, `usize`, …).
    pub params: &'static [(&'static str, &'static str)],
    /// Whether a request (`circulant_request **request`) comes last.
    pub request: bool,
}

macro_rules! c_forms {
    ($($(#[doc = $doc:expr])* $name:ident, $iname:ident, $init:ident $(/ $bytes:ident, $ibytes:ident, $init_bytes:ident)?:
        $shape:ident ($($arg:ident: $ty:ty),*) => |$comm:ident, $len:ident, $choice:ident $(, $reduction:ident)?| $make:expr;
        $(@c $cdoc:literal ($($cp:ident: $ct:ty),*) => |$cc:ident| $cmake:expr;)?
        $(@mpi $mstem:ident $mshape:ident;)?)*) => {
        $($(
            #[doc = $cdoc]
            #[export_name = concat!("circulant_", stringify!($name))]
            pub extern "C" fn $name(comm: *const Comm, $($cp: $ct),*) -> c_int {
                blocking(comm, stringify!($name), |$cc: &Comm| -> Outcome<Collective> { $cmake })
            }

            #[doc = concat!("Starts `circulant_", stringify!($name), "` and returns its request.")]
            #[export_name = concat!("circulant_", stringify!($iname))]
            pub extern "C" fn $iname(
                comm: *const Comm,
                $($cp: $ct,)*
                request: *mut *mut Pending,
            ) -> c_int {
                nonblocking(comm, stringify!($iname), request, |$cc: &Comm| -> Outcome<Collective> {
                    $cmake
                })
            }

            #[doc = concat!(
                "A persistent `circulant_", stringify!($name),
                "`: checked and set up now, started by `circulant_start` (arrays are copied)."
            )]
            #[export_name = concat!("circulant_", stringify!($init))]
            pub extern "C" fn $init(
                comm: *const Comm,
                $($cp: $ct,)*
                request: *mut *mut Pending,
            ) -> c_int {
                persistent(comm, stringify!($init), request, |$cc: &Comm| -> Outcome<Collective> {
                    $cmake
                })
            }
        )?)*

        /// Every C entry point of the collectives, in the order of the table.
        pub const C_FORMS: &[CForm] = &[
            $($(
                CForm {
                    name: concat!("circulant_", stringify!($name)),
                    doc: $cdoc,
                    params: &[$((stringify!($cp), stringify!($ct))),*],
                    request: false,
                },
                CForm {
                    name: concat!("circulant_", stringify!($iname)),
                    doc: concat!("Starts `circulant_", stringify!($name), "` and returns its request."),
                    params: &[$((stringify!($cp), stringify!($ct))),*],
                    request: true,
                },
                CForm {
                    name: concat!("circulant_", stringify!($init)),
                    doc: concat!(
                        "A persistent `circulant_", stringify!($name),
                        "`: checked and set up now, started by `circulant_start` (arrays are copied)."
                    ),
                    params: &[$((stringify!($cp), stringify!($ct))),*],
                    request: true,
                },
            )?)*
        ];
    };
}

crate::comm::collectives!(c_forms);
