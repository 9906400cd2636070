//! The two calls into glibc's allocator, through the `libc` crate's declarations: the only
//! `unsafe` code in the workspace (decision 0031).

#![allow(unsafe_code)]

use crate::Reading;

/// glibc's `mallinfo` totals over every arena, walked under each arena's lock (`mallinfo2`,
/// with `size_t` fields, needs glibc 2.33). Its `int` fields wrap past 2 GiB; they are read as
/// unsigned, so up to 4 GiB reads right.
pub fn reading() -> Reading {
    // SAFETY: `mallinfo` takes nothing and returns a plain struct by value; it only reads the
    // allocator's state under its own locks, from any thread.
    let info = unsafe { libc::mallinfo() };
    let unsigned = |v: libc::c_int| u64::from(v as u32);
    Reading { in_use: unsigned(info.uordblks), free: unsigned(info.fordblks) }
}

/// glibc ≥ 2.8: releases free memory at the top of the main heap and, with `madvise`, every
/// whole free page inside every arena (no slack kept at the top).
pub fn trim() {
    // SAFETY: `malloc_trim` takes a size and touches only the allocator's own state, under its
    // own locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
