//! The two calls into glibc's allocator: the only `unsafe` code in the workspace (decision 0031).

#![allow(unsafe_code)]

use std::ffi::c_int;

use crate::Reading;

/// glibc's `struct mallinfo` (every glibc has it; `mallinfo2`, with `size_t` fields, needs 2.33).
/// Its `int` fields wrap past 2 GiB; they are read as unsigned, so up to 4 GiB reads right.
#[repr(C)]
struct MallInfo {
    arena: c_int,
    ordblks: c_int,
    smblks: c_int,
    hblks: c_int,
    hblkhd: c_int,
    usmblks: c_int,
    fsmblks: c_int,
    uordblks: c_int,
    fordblks: c_int,
    keepcost: c_int,
}

unsafe extern "C" {
    /// glibc ≥ 2.8: releases free memory at the top of the main heap and, with `madvise`, every
    /// whole free page inside every arena. `pad` is the slack left at the top. Returns 1 if
    /// anything was released.
    fn malloc_trim(pad: usize) -> c_int;

    /// Totals over every arena, walked under each arena's lock.
    fn mallinfo() -> MallInfo;
}

pub fn reading() -> Reading {
    // SAFETY: `mallinfo` takes nothing and returns a plain struct by value; it only reads the
    // allocator's state under its own locks, from any thread.
    let info = unsafe { mallinfo() };
    let unsigned = |v: c_int| u64::from(v as u32);
    Reading { in_use: unsigned(info.uordblks), free: unsigned(info.fordblks) }
}

pub fn trim() {
    // SAFETY: `malloc_trim` takes a size and touches only the allocator's own state, under its
    // own locks; it is safe to call from any thread at any time.
    unsafe {
        malloc_trim(0);
    }
}
