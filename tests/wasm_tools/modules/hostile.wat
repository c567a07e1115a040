;; A hostile module for the tests. stdin names what it tries:
;;   loop    spin forever (fuel or the deadline must stop it)
;;   hog     grow memory until refused; prints how many pages it got
;;   escape  open ../outside.txt, /etc/passwd and inside.txt read-only, and create new.txt,
;;           through the preopened directory (fd 3); prints each errno (0: it worked)
;;   clock   read the wall clock; prints the errno
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 200) "../outside.txt")   ;; 14
  (data (i32.const 220) "/etc/passwd")      ;; 11
  (data (i32.const 240) "inside.txt")       ;; 10
  (data (i32.const 260) "new.txt")          ;; 7
  (global $out (mut i32) (i32.const 1024))
  (func $emit (param $b i32)
    (i32.store8 (global.get $out) (local.get $b))
    (global.set $out (i32.add (global.get $out) (i32.const 1))))
  (func $number (param $n i32) (local $d i32)
    (if (i32.ge_u (local.get $n) (i32.const 10)) (then (call $number (i32.div_u (local.get $n) (i32.const 10)))))
    (call $emit (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10)))))
  (func $flush
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (i32.sub (global.get $out) (i32.const 1024)))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16))))
  (func $open (param $path i32) (param $len i32) (param $oflags i32) (param $rights i64) (result i32)
    (call $path_open (i32.const 3) (i32.const 0) (local.get $path) (local.get $len) (local.get $oflags)
      (local.get $rights) (i64.const 0) (i32.const 0) (i32.const 32)))
  (func (export "_start") (local $mode i32) (local $pages i32)
    (i32.store (i32.const 0) (i32.const 100))
    (i32.store (i32.const 4) (i32.const 16))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)))
    (local.set $mode (i32.load8_u (i32.const 100)))
    ;; l: loop forever
    (if (i32.eq (local.get $mode) (i32.const 108)) (then (loop $forever (br $forever))))
    ;; h: grow 16 pages (1 MiB) at a time until refused
    (if (i32.eq (local.get $mode) (i32.const 104))
      (then
        (block $refused (loop $grow
          (br_if $refused (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
          (br $grow)))
        (call $number (memory.size))
        (call $flush)
        (return)))
    ;; e: escape attempts (rights: fd_read = 2, fd_write = 64; O_CREAT = 1)
    (if (i32.eq (local.get $mode) (i32.const 101))
      (then
        (call $number (call $open (i32.const 200) (i32.const 14) (i32.const 0) (i64.const 2)))
        (call $emit (i32.const 32))
        (call $number (call $open (i32.const 220) (i32.const 11) (i32.const 0) (i64.const 2)))
        (call $emit (i32.const 32))
        (call $number (call $open (i32.const 240) (i32.const 10) (i32.const 0) (i64.const 2)))
        (call $emit (i32.const 32))
        (call $number (call $open (i32.const 260) (i32.const 7) (i32.const 1) (i64.const 66)))
        (call $flush)
        (return)))
    ;; c: the clock
    (if (i32.eq (local.get $mode) (i32.const 99))
      (then
        (call $number (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 64)))
        (call $flush)))))
