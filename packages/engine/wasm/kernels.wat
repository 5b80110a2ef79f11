;; Orchard matrix kernels: WASM SIMD (128-bit), one shared memory, any number of threads.
;;
;; Build: `pnpm --filter @orchard/engine build:wasm` (wasm/build.ts, wabt) writes kernels.wasm next to
;; this file; a test rebuilds it and fails when the committed binary is stale.
;;
;; Memory map (addresses fixed here and in src/kernels/wasm/layout.ts):
;;   [64, 128)        job descriptor, read by every thread in $run_job (see below)
;;   [128, 192)       attention parameters (kernel 12, see $attn_item)
;;   [192, 200)       per-thread weight scratch: base, bytes per thread (prompt batches, $rows)
;;   [200, 208)       the current packed f16 weight's subnormal terms: row starts, entries (0: none)
;;   [208, 212)       the current q8_0/q4_0 prompt batch's activations in tile layout (quant_tiles)
;;   [4096, 266240)   f16 -> f32 table (65,536 f32), filled by the loader; used for block scales
;;   [266240, ...)    heap: weights, activations and scratch, handed out by the JS bump allocator
;;
;; Job descriptor (i32 fields at 64 + 4*i):
;;   0 gen   1 kernel   2 out   3 w   4 x   5 rows   6 cols   7 n   8 rowBytes   9 xStride
;;   10 next chunk (atomic)   11 chunk rows   12 done (atomic, JS)   13 stop   14 ready   15 error
;;
;; A kernel is a pair of functions in the table: dot4 (4 weight rows against one activation vector,
;; 4 outputs) at index k and dot1 (one row) at k+1. All take (w, rowBytes, x, cols, out). Packed weights
;; (4 rows interleaved, see "packed layouts") use kernels 22/24/26: a group kernel at k, which takes
;; (w, cols, x, out, groups), and the row-major dot1 for the rows%4 tail at k+1. Work is split
;; by output rows: threads take chunks of `chunk rows` rows (a multiple of 4) from an atomic counter, so a
;; thread the OS delays simply takes fewer chunks.
;;
;; Activation formats the kernels read (prepared on the calling thread before the job starts):
;;   f32    x as is.
;;   f16    per group of 8 columns: x[0,2,4,6]·2^64 then x[1,3,5,7]·2^64; the cols%8 tail unscaled.
;;          An f16 weight is widened with 3 integer ops to f32 bits that equal w·2^-112; the 2^64 on x
;;          and a final ·2^48 restore the scale without a multiply per weight. Inf/NaN f16 weights are
;;          not representable this way (they widen to finite values); checkpoints never contain them.
;;   bf16   same even/odd order, unscaled (a bf16 is the top half of an f32).
;;   q8_0, q4_0   x quantized like llama.cpp's (x86) Q8_0 activations: per 32-block d = f16(amax/127),
;;          q = nearest-even(x·(127/amax)) as i16 (cols i16; for q4_0 each block's second half as
;;          q[j+16] − 16·q[j]), then per block the i32 correction 8·Σq for q4_0's offset, then per block
;;          the f32 scale (see quant_q8). Integer dot products.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (type $dot (func (param i32 i32 i32 i32 i32)))
  (type $dot2 (func (param i32 i32 i32 i32 i32 i32 i32)))
  ;; Group kernels of packed weights: (w, cols, x, out, groups).
  (type $gdot (func (param i32 i32 i32 i32 i32)))
  (table 28 funcref)
  (elem (i32.const 0)
    $dot4_f32 $dot1_f32 $dot4_f16 $dot1_f16 $dot4_bf16 $dot1_bf16
    $dot4_q8_0 $dot1_q8_0 $dot4_q4_0 $dot1_q4_0 $dot4_read $dot1_read)
  ;; 4-row x 2-token kernels of the float dtypes at 16 + dot4 index (type $dot2).
  (elem (i32.const 16) $dot4x2_f32)
  (elem (i32.const 18) $dot4x2_f16)
  (elem (i32.const 20) $dot4x2_bf16)
  ;; Packed weights (4 rows interleaved): the group kernel at k, the row-major 1-row kernel for the
  ;; rows%4 tail at k+1.
  (elem (i32.const 22) $g4_f16 $dot1_f16 $g4_q8_0 $dot1_q8_0 $g4_q4_0 $dot1_q4_0)

  (global $CTL i32 (i32.const 64))

  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; f16 -> f32 through the table is written inline as (f32.load offset=4096 (i32.shl h 2)): V8 does not
  ;; inline small wasm functions, and a call per block scale costs as much as the block's dot product.

  ;; ---------------------------------------------------------------- f32
  (func $dot4_f32 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $xv v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $xs f32)
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xv (v128.load (i32.add (local.get $x) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (i32.add (local.get $w) (local.get $o))) (local.get $xv))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (v128.load (i32.add (local.get $w1) (local.get $o))) (local.get $xv))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (v128.load (i32.add (local.get $w2) (local.get $o))) (local.get $xv))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (v128.load (i32.add (local.get $w3) (local.get $o))) (local.get $xv))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (call $hsum (local.get $a0)))
    (local.set $s1 (call $hsum (local.get $a1)))
    (local.set $s2 (call $hsum (local.get $a2)))
    (local.set $s3 (call $hsum (local.get $a3)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 2)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xs (f32.load (i32.add (local.get $x) (local.get $o))))
        (local.set $s0 (f32.add (local.get $s0) (f32.mul (f32.load (i32.add (local.get $w) (local.get $o))) (local.get $xs))))
        (local.set $s1 (f32.add (local.get $s1) (f32.mul (f32.load (i32.add (local.get $w1) (local.get $o))) (local.get $xs))))
        (local.set $s2 (f32.add (local.get $s2) (f32.mul (f32.load (i32.add (local.get $w2) (local.get $o))) (local.get $xs))))
        (local.set $s3 (f32.add (local.get $s3) (f32.mul (f32.load (i32.add (local.get $w3) (local.get $o))) (local.get $xs))))
        (local.set $o (i32.add (local.get $o) (i32.const 4)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $s0))
    (f32.store offset=4 (local.get $out) (local.get $s1))
    (f32.store offset=8 (local.get $out) (local.get $s2))
    (f32.store offset=12 (local.get $out) (local.get $s3)))

  (func $dot1_f32 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $o i32) (local $end i32) (local $a0 v128) (local $s0 f32)
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (v128.load (i32.add (local.get $w) (local.get $o))) (v128.load (i32.add (local.get $x) (local.get $o))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (call $hsum (local.get $a0)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 2)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $s0 (f32.add (local.get $s0)
          (f32.mul (f32.load (i32.add (local.get $w) (local.get $o))) (f32.load (i32.add (local.get $x) (local.get $o))))))
        (local.set $o (i32.add (local.get $o) (i32.const 4)))
        (br $t)))
    (f32.store (local.get $out) (local.get $s0)))

  ;; ---------------------------------------------------------------- f16
  ;; A 16-byte load holds 8 weights; i32 lane k = w[2k] | w[2k+1] << 16. Even weights:
  ;; i32x4.dot_i16x8_s(v, (2^13, 0)) = sext(w[2k])·2^13, odd weights: v >>s 3 (the same bits: sign copies
  ;; in 31..28, the 15 exponent/mantissa bits in 27..13); then mask to sign | exponent | mantissa
  ;; (0x8FFFE000) = f32 bits of w·2^-112. The multiply-add does in one op what (v << 16) >>s 3 does in
  ;; two, on the multiply ports instead of the shift ports: 4 integer ops per 8 weights instead of 5,
  ;; +11–16% on the packed decode kernel (cold 17.6 → 19.8 GB/s against a 23.5 GB/s read, 1 thread).
  (func $dot4_f16 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $xo i32) (local $c i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $xe v128) (local $xd v128)
    (local $m v128) (local $v v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $xs f32)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    ;; $o: byte offset into weights (2 per column); x offset is 2*$o
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xe (v128.load offset=0 (local.get $xo)))
        (local.set $xd (v128.load offset=16 (local.get $xo)))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add
          (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
          (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add
          (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
          (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add
          (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
          (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add
          (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
          (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (f32.mul (call $hsum (local.get $a0)) (f32.const 0x1p48)))
    (local.set $s1 (f32.mul (call $hsum (local.get $a1)) (f32.const 0x1p48)))
    (local.set $s2 (f32.mul (call $hsum (local.get $a2)) (f32.const 0x1p48)))
    (local.set $s3 (f32.mul (call $hsum (local.get $a3)) (f32.const 0x1p48)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xs (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $s0 (f32.add (local.get $s0) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 2))) (local.get $xs))))
        (local.set $s1 (f32.add (local.get $s1) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w1) (local.get $o))) (i32.const 2))) (local.get $xs))))
        (local.set $s2 (f32.add (local.get $s2) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w2) (local.get $o))) (i32.const 2))) (local.get $xs))))
        (local.set $s3 (f32.add (local.get $s3) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w3) (local.get $o))) (i32.const 2))) (local.get $xs))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $s0))
    (f32.store offset=4 (local.get $out) (local.get $s1))
    (f32.store offset=8 (local.get $out) (local.get $s2))
    (f32.store offset=12 (local.get $out) (local.get $s3)))

  (func $dot1_f16 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $o i32) (local $end i32) (local $xo i32)
    (local $a0 v128) (local $m v128) (local $v v128) (local $s0 f32)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add
          (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (v128.load offset=0 (local.get $xo)))
          (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (v128.load offset=16 (local.get $xo))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (f32.mul (call $hsum (local.get $a0)) (f32.const 0x1p48)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $s0 (f32.add (local.get $s0)
          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 2)))
                   (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store (local.get $out) (local.get $s0)))

  ;; ---------------------------------------------------------------- bf16
  ;; Even weights: v << 16; odd weights: v & 0xFFFF0000 (a bf16 is the top half of an f32).
  (func $dot4_bf16 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $xo i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $xe v128) (local $xd v128)
    (local $m v128) (local $v v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $xs f32)
    (local.set $m (v128.const i32x4 0xFFFF0000 0xFFFF0000 0xFFFF0000 0xFFFF0000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xe (v128.load offset=0 (local.get $xo)))
        (local.set $xd (v128.load offset=16 (local.get $xo)))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add
          (f32x4.mul (i32x4.shl (local.get $v) (i32.const 16)) (local.get $xe))
          (f32x4.mul (v128.and (local.get $v) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add
          (f32x4.mul (i32x4.shl (local.get $v) (i32.const 16)) (local.get $xe))
          (f32x4.mul (v128.and (local.get $v) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add
          (f32x4.mul (i32x4.shl (local.get $v) (i32.const 16)) (local.get $xe))
          (f32x4.mul (v128.and (local.get $v) (local.get $m)) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add
          (f32x4.mul (i32x4.shl (local.get $v) (i32.const 16)) (local.get $xe))
          (f32x4.mul (v128.and (local.get $v) (local.get $m)) (local.get $xd)))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (call $hsum (local.get $a0)))
    (local.set $s1 (call $hsum (local.get $a1)))
    (local.set $s2 (call $hsum (local.get $a2)))
    (local.set $s3 (call $hsum (local.get $a3)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xs (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $s0 (f32.add (local.get $s0) (f32.mul (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 16))) (local.get $xs))))
        (local.set $s1 (f32.add (local.get $s1) (f32.mul (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w1) (local.get $o))) (i32.const 16))) (local.get $xs))))
        (local.set $s2 (f32.add (local.get $s2) (f32.mul (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w2) (local.get $o))) (i32.const 16))) (local.get $xs))))
        (local.set $s3 (f32.add (local.get $s3) (f32.mul (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w3) (local.get $o))) (i32.const 16))) (local.get $xs))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $s0))
    (f32.store offset=4 (local.get $out) (local.get $s1))
    (f32.store offset=8 (local.get $out) (local.get $s2))
    (f32.store offset=12 (local.get $out) (local.get $s3)))

  (func $dot1_bf16 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $o i32) (local $end i32) (local $xo i32)
    (local $a0 v128) (local $m v128) (local $v v128) (local $s0 f32)
    (local.set $m (v128.const i32x4 0xFFFF0000 0xFFFF0000 0xFFFF0000 0xFFFF0000))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add
          (f32x4.mul (i32x4.shl (local.get $v) (i32.const 16)) (v128.load offset=0 (local.get $xo)))
          (f32x4.mul (v128.and (local.get $v) (local.get $m)) (v128.load offset=16 (local.get $xo))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $s0 (call $hsum (local.get $a0)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $s0 (f32.add (local.get $s0)
          (f32.mul (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 16)))
                   (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store (local.get $out) (local.get $s0)))

  ;; ---------------------------------------------------------------- 4 rows x 2 tokens (matmul)
  ;; Prompt batches: each weight vector loaded (and widened) once feeds two tokens. Same numerics as
  ;; the dot4 kernels (same per-token summation order), so batch and single-token results are equal.
  (func $dot4x2_f32 (type $dot2) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32) (param $xs i32) (param $os i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $x2 i32) (local $xo i32) (local $xo2 i32)
    (local $a0 v128) (local $b0 v128) (local $a1 v128) (local $b1 v128) (local $a2 v128) (local $b2 v128) (local $a3 v128) (local $b3 v128)
    (local $xa v128) (local $xb v128) (local $xc v128) (local $xd v128) (local $v v128) (local $e v128) (local $d v128) (local $m v128)
    (local $sa0 f32) (local $sb0 f32) (local $sa1 f32) (local $sb1 f32) (local $sa2 f32) (local $sb2 f32) (local $sa3 f32) (local $sb3 f32) (local $ya f32) (local $yb f32) (local $s f32)
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $x2 (i32.add (local.get $x) (local.get $xs)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xa (v128.load (i32.add (local.get $x) (local.get $o))))
        (local.set $xb (v128.load (i32.add (local.get $x2) (local.get $o))))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $v) (local.get $xa))))
        (local.set $b0 (f32x4.add (local.get $b0) (f32x4.mul (local.get $v) (local.get $xb))))
        (local.set $v (v128.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $v) (local.get $xa))))
        (local.set $b1 (f32x4.add (local.get $b1) (f32x4.mul (local.get $v) (local.get $xb))))
        (local.set $v (v128.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $v) (local.get $xa))))
        (local.set $b2 (f32x4.add (local.get $b2) (f32x4.mul (local.get $v) (local.get $xb))))
        (local.set $v (v128.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $v) (local.get $xa))))
        (local.set $b3 (f32x4.add (local.get $b3) (f32x4.mul (local.get $v) (local.get $xb))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $sa0 (call $hsum (local.get $a0)))
    (local.set $sb0 (call $hsum (local.get $b0)))
    (local.set $sa1 (call $hsum (local.get $a1)))
    (local.set $sb1 (call $hsum (local.get $b1)))
    (local.set $sa2 (call $hsum (local.get $a2)))
    (local.set $sb2 (call $hsum (local.get $b2)))
    (local.set $sa3 (call $hsum (local.get $a3)))
    (local.set $sb3 (call $hsum (local.get $b3)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 2)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $ya (f32.load (i32.add (local.get $x) (local.get $o))))
        (local.set $yb (f32.load (i32.add (local.get $x2) (local.get $o))))
        (local.set $s (f32.load (i32.add (local.get $w) (local.get $o))))
        (local.set $sa0 (f32.add (local.get $sa0) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb0 (f32.add (local.get $sb0) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $sa1 (f32.add (local.get $sa1) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb1 (f32.add (local.get $sb1) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $sa2 (f32.add (local.get $sa2) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb2 (f32.add (local.get $sb2) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $sa3 (f32.add (local.get $sa3) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb3 (f32.add (local.get $sb3) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $o (i32.add (local.get $o) (i32.const 4)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $sa0))
    (f32.store offset=4 (local.get $out) (local.get $sa1))
    (f32.store offset=8 (local.get $out) (local.get $sa2))
    (f32.store offset=12 (local.get $out) (local.get $sa3))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (f32.store offset=0 (local.get $out) (local.get $sb0))
    (f32.store offset=4 (local.get $out) (local.get $sb1))
    (f32.store offset=8 (local.get $out) (local.get $sb2))
    (f32.store offset=12 (local.get $out) (local.get $sb3)))

  (func $dot4x2_f16 (type $dot2) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32) (param $xs i32) (param $os i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $x2 i32) (local $xo i32) (local $xo2 i32)
    (local $a0 v128) (local $b0 v128) (local $a1 v128) (local $b1 v128) (local $a2 v128) (local $b2 v128) (local $a3 v128) (local $b3 v128)
    (local $xa v128) (local $xb v128) (local $xc v128) (local $xd v128) (local $v v128) (local $e v128) (local $d v128) (local $m v128)
    (local $sa0 f32) (local $sb0 f32) (local $sa1 f32) (local $sb1 f32) (local $sa2 f32) (local $sb2 f32) (local $sa3 f32) (local $sb3 f32) (local $ya f32) (local $yb f32) (local $s f32)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $x2 (i32.add (local.get $x) (local.get $xs)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xo2 (i32.add (local.get $x2) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xa (v128.load offset=0 (local.get $xo)))
        (local.set $xb (v128.load offset=16 (local.get $xo)))
        (local.set $xc (v128.load offset=0 (local.get $xo2)))
        (local.set $xd (v128.load offset=16 (local.get $xo2)))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $e (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)))
        (local.set $d (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b0 (f32x4.add (local.get $b0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $e (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)))
        (local.set $d (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b1 (f32x4.add (local.get $b1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $e (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)))
        (local.set $d (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b2 (f32x4.add (local.get $b2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $e (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)))
        (local.set $d (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b3 (f32x4.add (local.get $b3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $sa0 (f32.mul (call $hsum (local.get $a0)) (f32.const 0x1p48)))
    (local.set $sb0 (f32.mul (call $hsum (local.get $b0)) (f32.const 0x1p48)))
    (local.set $sa1 (f32.mul (call $hsum (local.get $a1)) (f32.const 0x1p48)))
    (local.set $sb1 (f32.mul (call $hsum (local.get $b1)) (f32.const 0x1p48)))
    (local.set $sa2 (f32.mul (call $hsum (local.get $a2)) (f32.const 0x1p48)))
    (local.set $sb2 (f32.mul (call $hsum (local.get $b2)) (f32.const 0x1p48)))
    (local.set $sa3 (f32.mul (call $hsum (local.get $a3)) (f32.const 0x1p48)))
    (local.set $sb3 (f32.mul (call $hsum (local.get $b3)) (f32.const 0x1p48)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $ya (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $yb (f32.load (i32.add (local.get $x2) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $s (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 2))))
        (local.set $sa0 (f32.add (local.get $sa0) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb0 (f32.add (local.get $sb0) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w1) (local.get $o))) (i32.const 2))))
        (local.set $sa1 (f32.add (local.get $sa1) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb1 (f32.add (local.get $sb1) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w2) (local.get $o))) (i32.const 2))))
        (local.set $sa2 (f32.add (local.get $sa2) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb2 (f32.add (local.get $sb2) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load offset=4096 (i32.shl (i32.load16_u (i32.add (local.get $w3) (local.get $o))) (i32.const 2))))
        (local.set $sa3 (f32.add (local.get $sa3) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb3 (f32.add (local.get $sb3) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $sa0))
    (f32.store offset=4 (local.get $out) (local.get $sa1))
    (f32.store offset=8 (local.get $out) (local.get $sa2))
    (f32.store offset=12 (local.get $out) (local.get $sa3))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (f32.store offset=0 (local.get $out) (local.get $sb0))
    (f32.store offset=4 (local.get $out) (local.get $sb1))
    (f32.store offset=8 (local.get $out) (local.get $sb2))
    (f32.store offset=12 (local.get $out) (local.get $sb3)))

  (func $dot4x2_bf16 (type $dot2) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32) (param $xs i32) (param $os i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $x2 i32) (local $xo i32) (local $xo2 i32)
    (local $a0 v128) (local $b0 v128) (local $a1 v128) (local $b1 v128) (local $a2 v128) (local $b2 v128) (local $a3 v128) (local $b3 v128)
    (local $xa v128) (local $xb v128) (local $xc v128) (local $xd v128) (local $v v128) (local $e v128) (local $d v128) (local $m v128)
    (local $sa0 f32) (local $sb0 f32) (local $sa1 f32) (local $sb1 f32) (local $sa2 f32) (local $sb2 f32) (local $sa3 f32) (local $sb3 f32) (local $ya f32) (local $yb f32) (local $s f32)
    (local.set $m (v128.const i32x4 0xFFFF0000 0xFFFF0000 0xFFFF0000 0xFFFF0000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $x2 (i32.add (local.get $x) (local.get $xs)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xo (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xo2 (i32.add (local.get $x2) (i32.shl (local.get $o) (i32.const 1))))
        (local.set $xa (v128.load offset=0 (local.get $xo)))
        (local.set $xb (v128.load offset=16 (local.get $xo)))
        (local.set $xc (v128.load offset=0 (local.get $xo2)))
        (local.set $xd (v128.load offset=16 (local.get $xo2)))
        (local.set $v (v128.load (i32.add (local.get $w) (local.get $o))))
        (local.set $e (i32x4.shl (local.get $v) (i32.const 16)))
        (local.set $d (v128.and (local.get $v) (local.get $m)))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b0 (f32x4.add (local.get $b0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $e (i32x4.shl (local.get $v) (i32.const 16)))
        (local.set $d (v128.and (local.get $v) (local.get $m)))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b1 (f32x4.add (local.get $b1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $e (i32x4.shl (local.get $v) (i32.const 16)))
        (local.set $d (v128.and (local.get $v) (local.get $m)))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b2 (f32x4.add (local.get $b2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $v (v128.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $e (i32x4.shl (local.get $v) (i32.const 16)))
        (local.set $d (v128.and (local.get $v) (local.get $m)))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b3 (f32x4.add (local.get $b3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $sa0 (call $hsum (local.get $a0)))
    (local.set $sb0 (call $hsum (local.get $b0)))
    (local.set $sa1 (call $hsum (local.get $a1)))
    (local.set $sb1 (call $hsum (local.get $b1)))
    (local.set $sa2 (call $hsum (local.get $a2)))
    (local.set $sb2 (call $hsum (local.get $b2)))
    (local.set $sa3 (call $hsum (local.get $a3)))
    (local.set $sb3 (call $hsum (local.get $b3)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 1)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $ya (f32.load (i32.add (local.get $x) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $yb (f32.load (i32.add (local.get $x2) (i32.shl (local.get $o) (i32.const 1)))))
        (local.set $s (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w) (local.get $o))) (i32.const 16))))
        (local.set $sa0 (f32.add (local.get $sa0) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb0 (f32.add (local.get $sb0) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w1) (local.get $o))) (i32.const 16))))
        (local.set $sa1 (f32.add (local.get $sa1) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb1 (f32.add (local.get $sb1) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w2) (local.get $o))) (i32.const 16))))
        (local.set $sa2 (f32.add (local.get $sa2) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb2 (f32.add (local.get $sb2) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.reinterpret_i32 (i32.shl (i32.load16_u (i32.add (local.get $w3) (local.get $o))) (i32.const 16))))
        (local.set $sa3 (f32.add (local.get $sa3) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb3 (f32.add (local.get $sb3) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $sa0))
    (f32.store offset=4 (local.get $out) (local.get $sa1))
    (f32.store offset=8 (local.get $out) (local.get $sa2))
    (f32.store offset=12 (local.get $out) (local.get $sa3))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (f32.store offset=0 (local.get $out) (local.get $sb0))
    (f32.store offset=4 (local.get $out) (local.get $sb1))
    (f32.store offset=8 (local.get $out) (local.get $sb2))
    (f32.store offset=12 (local.get $out) (local.get $sb3)))

  ;; ---------------------------------------------------------------- f16 prompt batches
  ;; For n >= 4 tokens an f16 row group is widened once into the calling thread's scratch (the same
  ;; w·2^-112 bit patterns the f16 kernels compute, in the same even/odd order; tail columns as plain
  ;; f32), then 4 rows x 2 tokens run from there: identical arithmetic to $dot4x2_f16, without
  ;; widening every weight again for every token pair.
  (func $widen4_f16 (param $w i32) (param $rowStep i32) (param $chunkStep i32) (param $tail0 i32) (param $tailStep i32) (param $dst i32) (param $cols i32)
    ;; Row r's 8-column chunk k is at w + r·rowStep + k·chunkStep and its cols%8 tail at tail0 + r·tailStep:
    ;; (rb, 16, w + full, rb) for row-major weights, (16, 64, w + (cols/8)·64, 2·(cols%8)) for packed ones.
    (local $r i32) (local $k i32) (local $nk i32) (local $src i32) (local $d i32) (local $t i32) (local $c i32) (local $nt i32) (local $v v128) (local $m v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $nk (i32.shr_u (local.get $cols) (i32.const 3)))
    (local.set $nt (i32.and (local.get $cols) (i32.const 7)))
    (block $rdone
      (loop $rl
        (br_if $rdone (i32.ge_u (local.get $r) (i32.const 4)))
        (local.set $src (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rowStep))))
        (local.set $d (i32.add (local.get $dst) (i32.shl (i32.mul (local.get $r) (local.get $cols)) (i32.const 2))))
        (local.set $k (i32.const 0))
        (block $gdone
          (loop $gl
            (br_if $gdone (i32.ge_u (local.get $k) (local.get $nk)))
            (local.set $v (v128.load (local.get $src)))
            (v128.store offset=0 (local.get $d) (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)))
            (v128.store offset=16 (local.get $d) (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)))
            (local.set $src (i32.add (local.get $src) (local.get $chunkStep)))
            (local.set $d (i32.add (local.get $d) (i32.const 32)))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $gl)))
        (local.set $t (i32.add (local.get $tail0) (i32.mul (local.get $r) (local.get $tailStep))))
        (local.set $c (i32.const 0))
        (block $tdone
          (loop $tl
            (br_if $tdone (i32.ge_u (local.get $c) (local.get $nt)))
            (f32.store (local.get $d) (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))))
            (local.set $t (i32.add (local.get $t) (i32.const 2)))
            (local.set $d (i32.add (local.get $d) (i32.const 4)))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $tl)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rl))))

  ;; w: 4 widened rows (cols f32 each, $rb = cols*4 apart) in the layout of the prepared activations.
  (func $dot4x2_wpairs (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32) (param $xs i32) (param $os i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $x2 i32)
    (local $a0 v128) (local $b0 v128) (local $a1 v128) (local $b1 v128) (local $a2 v128) (local $b2 v128) (local $a3 v128) (local $b3 v128)
    (local $xa v128) (local $xb v128) (local $xc v128) (local $xd v128) (local $e v128) (local $d v128)
    (local $sa0 f32) (local $sb0 f32) (local $sa1 f32) (local $sb1 f32) (local $sa2 f32) (local $sb2 f32) (local $sa3 f32) (local $sb3 f32) (local $ya f32) (local $yb f32) (local $s f32)
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $x2 (i32.add (local.get $x) (local.get $xs)))
    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 2)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $xa (v128.load offset=0 (i32.add (local.get $x) (local.get $o))))
        (local.set $xb (v128.load offset=16 (i32.add (local.get $x) (local.get $o))))
        (local.set $xc (v128.load offset=0 (i32.add (local.get $x2) (local.get $o))))
        (local.set $xd (v128.load offset=16 (i32.add (local.get $x2) (local.get $o))))
        (local.set $e (v128.load offset=0 (i32.add (local.get $w) (local.get $o))))
        (local.set $d (v128.load offset=16 (i32.add (local.get $w) (local.get $o))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b0 (f32x4.add (local.get $b0) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $e (v128.load offset=0 (i32.add (local.get $w1) (local.get $o))))
        (local.set $d (v128.load offset=16 (i32.add (local.get $w1) (local.get $o))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b1 (f32x4.add (local.get $b1) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $e (v128.load offset=0 (i32.add (local.get $w2) (local.get $o))))
        (local.set $d (v128.load offset=16 (i32.add (local.get $w2) (local.get $o))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b2 (f32x4.add (local.get $b2) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $e (v128.load offset=0 (i32.add (local.get $w3) (local.get $o))))
        (local.set $d (v128.load offset=16 (i32.add (local.get $w3) (local.get $o))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xa)) (f32x4.mul (local.get $d) (local.get $xb)))))
        (local.set $b3 (f32x4.add (local.get $b3) (f32x4.add (f32x4.mul (local.get $e) (local.get $xc)) (f32x4.mul (local.get $d) (local.get $xd)))))
        (local.set $o (i32.add (local.get $o) (i32.const 32)))
        (br $l)))
    (local.set $sa0 (f32.mul (call $hsum (local.get $a0)) (f32.const 0x1p48)))
    (local.set $sb0 (f32.mul (call $hsum (local.get $b0)) (f32.const 0x1p48)))
    (local.set $sa1 (f32.mul (call $hsum (local.get $a1)) (f32.const 0x1p48)))
    (local.set $sb1 (f32.mul (call $hsum (local.get $b1)) (f32.const 0x1p48)))
    (local.set $sa2 (f32.mul (call $hsum (local.get $a2)) (f32.const 0x1p48)))
    (local.set $sb2 (f32.mul (call $hsum (local.get $b2)) (f32.const 0x1p48)))
    (local.set $sa3 (f32.mul (call $hsum (local.get $a3)) (f32.const 0x1p48)))
    (local.set $sb3 (f32.mul (call $hsum (local.get $b3)) (f32.const 0x1p48)))
    (local.set $end (i32.shl (local.get $cols) (i32.const 2)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (local.set $ya (f32.load (i32.add (local.get $x) (local.get $o))))
        (local.set $yb (f32.load (i32.add (local.get $x2) (local.get $o))))
        (local.set $s (f32.load (i32.add (local.get $w) (local.get $o))))
        (local.set $sa0 (f32.add (local.get $sa0) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb0 (f32.add (local.get $sb0) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w1) (local.get $o))))
        (local.set $sa1 (f32.add (local.get $sa1) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb1 (f32.add (local.get $sb1) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w2) (local.get $o))))
        (local.set $sa2 (f32.add (local.get $sa2) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb2 (f32.add (local.get $sb2) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $s (f32.load (i32.add (local.get $w3) (local.get $o))))
        (local.set $sa3 (f32.add (local.get $sa3) (f32.mul (local.get $s) (local.get $ya))))
        (local.set $sb3 (f32.add (local.get $sb3) (f32.mul (local.get $s) (local.get $yb))))
        (local.set $o (i32.add (local.get $o) (i32.const 4)))
        (br $t)))
    (f32.store offset=0 (local.get $out) (local.get $sa0))
    (f32.store offset=4 (local.get $out) (local.get $sa1))
    (f32.store offset=8 (local.get $out) (local.get $sa2))
    (f32.store offset=12 (local.get $out) (local.get $sa3))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (f32.store offset=0 (local.get $out) (local.get $sb0))
    (f32.store offset=4 (local.get $out) (local.get $sb1))
    (f32.store offset=8 (local.get $out) (local.get $sb2))
    (f32.store offset=12 (local.get $out) (local.get $sb3)))

  ;; ---------------------------------------------------------------- q8_0 / q4_0
  ;; Every output is summed the same way whatever the layout: per 32-block an exact i32 dot product of
  ;; the weights' integers with the 8-bit activations (i32x4.dot_i16x8_s, summed over lanes), then
  ;; s += f32(isum)·(d_w·d_x) in block order (f32 multiply, f32 add). |isum| < 2^24, so f32(isum) is
  ;; exact; packed, row-major, 1-row and prompt-batch kernels therefore give the same bits.
  ;; Packed weights (see "packed layouts" below) compute 4 rows at once: the four rows' i32x4 block
  ;; partials are transposed and added into one i32x4 of row totals, so the f32 step runs once per
  ;; block for 4 rows instead of once per row.
  ;;
  ;; Activations (quant_q8): per token cols i16, then per block an i32 correction (q4_0 only), then per
  ;; block the f32 scale d_x. For q4_0 the second half of each block is stored as x[j+16] − 16·x[j]:
  ;; a weight byte b = lo + 16·hi then needs no mask, since b·x[j] + hi·(x[j+16] − 16·x[j]) =
  ;; lo·x[j] + hi·x[j+16]; the −8 of every q4_0 weight is the correction 8·Σx, subtracted per block.

  (func $hsum_i32 (param $v v128) (result i32)
    (i32.add
      (i32.add (i32x4.extract_lane 0 (local.get $v)) (i32x4.extract_lane 1 (local.get $v)))
      (i32.add (i32x4.extract_lane 2 (local.get $v)) (i32x4.extract_lane 3 (local.get $v)))))

  ;; Row-major q8_0 (weights not packed, e.g. a tied LM head; the rows%4 tail of packed ones). Block:
  ;; f16 d, 32 x int8. Decode runs it row after row (one sequential stream), so it takes 4 blocks per
  ;; step: their integer totals come out of one transpose-add and their 4 terms f32(isum)·(d_w·d_x)
  ;; out of one vector multiply, then join the sum one by one in block order (the same bits as the
  ;; 4-row kernels; only the adds form a chain). Then the nb%4 remaining blocks one at a time.
  (func $dot1_q8_0 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $p i32) (local $end4 i32) (local $end i32) (local $xq i32) (local $xd i32) (local $s f32)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128) (local $d v128) (local $m v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $p (local.get $w))
    (local.set $end (i32.add (local.get $w) (local.get $rb)))
    (local.set $end4 (i32.add (local.get $w) (i32.mul (i32.and (i32.shr_u (local.get $cols) (i32.const 5)) (i32.const -4)) (i32.const 34))))
    (local.set $xq (local.get $x))
    (local.set $xd (i32.add (local.get $x) (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shr_u (local.get $cols) (i32.const 3)))))
    (block $done4
      (loop $l4
        (br_if $done4 (i32.ge_u (local.get $p) (local.get $end4)))
        (local.set $s0 (i32x4.add
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (v128.load offset=0 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (v128.load offset=16 (local.get $xq))))
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (v128.load offset=32 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (v128.load offset=48 (local.get $xq))))))
        (local.set $s1 (i32x4.add
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=36 (local.get $p)) (v128.load offset=64 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=44 (local.get $p)) (v128.load offset=80 (local.get $xq))))
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=52 (local.get $p)) (v128.load offset=96 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=60 (local.get $p)) (v128.load offset=112 (local.get $xq))))))
        (local.set $s2 (i32x4.add
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=70 (local.get $p)) (v128.load offset=128 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=78 (local.get $p)) (v128.load offset=144 (local.get $xq))))
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=86 (local.get $p)) (v128.load offset=160 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=94 (local.get $p)) (v128.load offset=176 (local.get $xq))))))
        (local.set $s3 (i32x4.add
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=104 (local.get $p)) (v128.load offset=192 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=112 (local.get $p)) (v128.load offset=208 (local.get $xq))))
          (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=120 (local.get $p)) (v128.load offset=224 (local.get $xq)))
                     (i32x4.dot_i16x8_s (v128.load8x8_s offset=128 (local.get $p)) (v128.load offset=240 (local.get $xq))))))
        (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
                                  (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
        (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
                                  (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
        (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))
                                  (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))
        (local.set $d (i32x4.replace_lane 3 (i32x4.replace_lane 2 (i32x4.replace_lane 1
          (i32x4.splat (i32.load16_u offset=0 (local.get $p)))
          (i32.load16_u offset=34 (local.get $p)))
          (i32.load16_u offset=68 (local.get $p)))
          (i32.load16_u offset=102 (local.get $p))))
        (local.set $d (f32x4.mul (f32x4.convert_i32x4_s (local.get $t0))
          (f32x4.mul
            (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (local.get $d) (i32.const 16)) (i32.const 3)) (local.get $m))
                       (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))
            (v128.load (local.get $xd)))))
        (local.set $s (f32.add (local.get $s) (f32x4.extract_lane 0 (local.get $d))))
        (local.set $s (f32.add (local.get $s) (f32x4.extract_lane 1 (local.get $d))))
        (local.set $s (f32.add (local.get $s) (f32x4.extract_lane 2 (local.get $d))))
        (local.set $s (f32.add (local.get $s) (f32x4.extract_lane 3 (local.get $d))))
        (local.set $p (i32.add (local.get $p) (i32.const 136)))
        (local.set $xq (i32.add (local.get $xq) (i32.const 256)))
        (local.set $xd (i32.add (local.get $xd) (i32.const 16)))
        (br $l4)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $s (f32.add (local.get $s) (f32.mul
          (f32.convert_i32_s (call $hsum_i32 (i32x4.add
            (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (v128.load offset=0 (local.get $xq)))
                       (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (v128.load offset=16 (local.get $xq))))
            (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (v128.load offset=32 (local.get $xq)))
                       (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (v128.load offset=48 (local.get $xq)))))))
          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $p)) (i32.const 2))) (f32.load (local.get $xd))))))
        (local.set $p (i32.add (local.get $p) (i32.const 34)))
        (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))
        (br $l)))
    (f32.store (local.get $out) (local.get $s)))

  ;; Row-major q4_0. Block: f16 d, 16 bytes; byte j holds element j (low nibble) and j+16 (high), q−8.
  (func $dot1_q4_0 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $p i32) (local $end i32) (local $xq i32) (local $xc i32) (local $s f32) (local $qa v128) (local $qb v128)
    (local.set $p (local.get $w))
    (local.set $end (i32.add (local.get $w) (local.get $rb)))
    (local.set $xq (local.get $x))
    (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $qa (v128.load8x8_u offset=2 (local.get $p)))
        (local.set $qb (v128.load8x8_u offset=10 (local.get $p)))
        (local.set $s (f32.add (local.get $s) (f32.mul
          (f32.convert_i32_s (i32.sub (call $hsum_i32 (i32x4.add
            (i32x4.add (i32x4.dot_i16x8_s (local.get $qa) (v128.load offset=0 (local.get $xq)))
                       (i32x4.dot_i16x8_s (local.get $qb) (v128.load offset=16 (local.get $xq))))
            (i32x4.add (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $qa) (i32.const 4)) (v128.load offset=32 (local.get $xq)))
                       (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $qb) (i32.const 4)) (v128.load offset=48 (local.get $xq))))))
            (i32.load (local.get $xc))))
          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $p)) (i32.const 2)))
                   (f32.load (i32.add (local.get $xc) (i32.shr_u (local.get $cols) (i32.const 3))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 18)))
        (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
        (local.set $xc (i32.add (local.get $xc) (i32.const 4)))
        (br $l)))
    (f32.store (local.get $out) (local.get $s)))

  ;; 4 row-major rows (unpacked weights, e.g. a tied LM head, or rows < 4 groups): the packed kernels'
  ;; block step with 4 row pointers and the 4 scales gathered, so the same bits as every other kernel.
  (func $dot4_q8_0 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $p i32) (local $xq i32) (local $xc i32) (local $nb i32)
    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $m v128) (local $acc v128) (local $d v128) (local $q v128) (local $q1 v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $xq (local.get $x))
    (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $rb)))
            (local.set $x0 (v128.load offset=0 (local.get $xq)))
            (local.set $x1 (v128.load offset=16 (local.get $xq)))
            (local.set $x2 (v128.load offset=32 (local.get $xq)))
            (local.set $x3 (v128.load offset=48 (local.get $xq)))
            (local.set $p (i32.add (local.get $w) (local.get $o)))
            (local.set $s0 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w1) (local.get $o)))
            (local.set $s1 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w2) (local.get $o)))
            (local.set $s2 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w3) (local.get $o)))
            (local.set $s3 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=2 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=10 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=18 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=26 (local.get $p)) (local.get $x3)))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
            (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))
                                      (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))
            ;; the 4 rows' f16 scales gathered into one vector, widened as in the packed kernels
            (local.set $d (i32x4.replace_lane 3 (i32x4.replace_lane 2 (i32x4.replace_lane 1
              (i32x4.splat (i32.load16_u (i32.add (local.get $w) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w1) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w2) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w3) (local.get $o)))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $t0))
              (f32x4.mul
                (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (local.get $d) (i32.const 16)) (i32.const 3)) (local.get $m))
                           (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))
                (f32x4.splat (f32.load (i32.add (local.get $xc) (i32.shl (local.get $nb) (i32.const 2)))))))))
        (local.set $o (i32.add (local.get $o) (i32.const 34)))
        (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
        (local.set $xc (i32.add (local.get $xc) (i32.const 4)))
        (br $l)))
    (v128.store (local.get $out) (local.get $acc)))

  (func $dot4_q4_0 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $w1 i32) (local $w2 i32) (local $w3 i32) (local $o i32) (local $end i32) (local $p i32) (local $xq i32) (local $xc i32) (local $nb i32)
    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $m v128) (local $acc v128) (local $d v128) (local $q v128) (local $q1 v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $w1 (i32.add (local.get $w) (local.get $rb)))
    (local.set $w2 (i32.add (local.get $w1) (local.get $rb)))
    (local.set $w3 (i32.add (local.get $w2) (local.get $rb)))
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $xq (local.get $x))
    (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $rb)))
            (local.set $x0 (v128.load offset=0 (local.get $xq)))
            (local.set $x1 (v128.load offset=16 (local.get $xq)))
            (local.set $x2 (v128.load offset=32 (local.get $xq)))
            (local.set $x3 (v128.load offset=48 (local.get $xq)))
            (local.set $p (i32.add (local.get $w) (local.get $o)))
            (local.set $q (v128.load8x8_u offset=2 (local.get $p)))
            (local.set $q1 (v128.load8x8_u offset=10 (local.get $p)))
            (local.set $s0 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2)))
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q1) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q1) (i32.const 4)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w1) (local.get $o)))
            (local.set $q (v128.load8x8_u offset=2 (local.get $p)))
            (local.set $q1 (v128.load8x8_u offset=10 (local.get $p)))
            (local.set $s1 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2)))
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q1) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q1) (i32.const 4)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w2) (local.get $o)))
            (local.set $q (v128.load8x8_u offset=2 (local.get $p)))
            (local.set $q1 (v128.load8x8_u offset=10 (local.get $p)))
            (local.set $s2 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2)))
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q1) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q1) (i32.const 4)) (local.get $x3)))))
            (local.set $p (i32.add (local.get $w3) (local.get $o)))
            (local.set $q (v128.load8x8_u offset=2 (local.get $p)))
            (local.set $q1 (v128.load8x8_u offset=10 (local.get $p)))
            (local.set $s3 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2)))
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q1) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q1) (i32.const 4)) (local.get $x3)))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
            (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))
                                      (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))
            ;; the 4 rows' f16 scales gathered into one vector, widened as in the packed kernels
            (local.set $d (i32x4.replace_lane 3 (i32x4.replace_lane 2 (i32x4.replace_lane 1
              (i32x4.splat (i32.load16_u (i32.add (local.get $w) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w1) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w2) (local.get $o))))
              (i32.load16_u (i32.add (local.get $w3) (local.get $o)))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.sub (local.get $t0) (i32x4.splat (i32.load (local.get $xc)))))
              (f32x4.mul
                (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (local.get $d) (i32.const 16)) (i32.const 3)) (local.get $m))
                           (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))
                (f32x4.splat (f32.load (i32.add (local.get $xc) (i32.shl (local.get $nb) (i32.const 2)))))))))
        (local.set $o (i32.add (local.get $o) (i32.const 18)))
        (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
        (local.set $xc (i32.add (local.get $xc) (i32.const 4)))
        (br $l)))
    (v128.store (local.get $out) (local.get $acc)))

  ;; ---------------------------------------------------------------- packed layouts
  ;; A packed weight (src/kernels/wasm/pack.ts) keeps rows in groups of 4, each group where its 4 rows
  ;; were, interleaved so one pass reads one sequential stream and every activation load serves 4 rows:
  ;;   f16   per 8 columns: row0 c..c+7, row1, row2, row3 (64 bytes); then the cols%8 tail row by row.
  ;;   q8_0  per 32-block: the 4 rows' f16 scales (8 bytes), then their 4 x 32 int8 (136 bytes).
  ;;   q4_0  per 32-block: the 4 rows' f16 scales (8 bytes), then their 4 x 16 bytes (72 bytes).
  ;; The rows%4 tail rows stay row-major after the groups. Group kernels (type $gdot) take `groups`
  ;; consecutive groups for one token and write 4 outputs per group.

  ;; f16: the arithmetic of $dot4_f16 (same order, same bits), from the interleaved layout.
  (func $g4_f16 (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)
    (local $g i32) (local $p i32) (local $xo i32) (local $xend i32) (local $tail i32) (local $t i32) (local $c i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $xe v128) (local $xd v128) (local $m v128) (local $v v128)
    (local $s0 f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $xs f32)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $xend (i32.add (local.get $x) (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 2))))
    (local.set $tail (i32.shl (i32.and (local.get $cols) (i32.const 7)) (i32.const 1)))
    (local.set $p (local.get $w))
    (block $gdone
      (loop $gl
        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))
        (local.set $xo (local.get $x))
        (local.set $a0 (v128.const i32x4 0 0 0 0))
        (local.set $a1 (v128.const i32x4 0 0 0 0))
        (local.set $a2 (v128.const i32x4 0 0 0 0))
        (local.set $a3 (v128.const i32x4 0 0 0 0))
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $xo) (local.get $xend)))
            (local.set $xe (v128.load offset=0 (local.get $xo)))
            (local.set $xd (v128.load offset=16 (local.get $xo)))
            (local.set $v (v128.load offset=0 (local.get $p)))
            (local.set $a0 (f32x4.add (local.get $a0) (f32x4.add
              (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
              (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
            (local.set $v (v128.load offset=16 (local.get $p)))
            (local.set $a1 (f32x4.add (local.get $a1) (f32x4.add
              (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
              (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
            (local.set $v (v128.load offset=32 (local.get $p)))
            (local.set $a2 (f32x4.add (local.get $a2) (f32x4.add
              (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
              (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
            (local.set $v (v128.load offset=48 (local.get $p)))
            (local.set $a3 (f32x4.add (local.get $a3) (f32x4.add
              (f32x4.mul (v128.and (i32x4.dot_i16x8_s (local.get $v) (v128.const i16x8 8192 0 8192 0 8192 0 8192 0)) (local.get $m)) (local.get $xe))
              (f32x4.mul (v128.and (i32x4.shr_s (local.get $v) (i32.const 3)) (local.get $m)) (local.get $xd)))))
            (local.set $p (i32.add (local.get $p) (i32.const 64)))
            (local.set $xo (i32.add (local.get $xo) (i32.const 32)))
            (br $l)))
        (local.set $s0 (f32.mul (call $hsum (local.get $a0)) (f32.const 0x1p48)))
        (local.set $s1 (f32.mul (call $hsum (local.get $a1)) (f32.const 0x1p48)))
        (local.set $s2 (f32.mul (call $hsum (local.get $a2)) (f32.const 0x1p48)))
        (local.set $s3 (f32.mul (call $hsum (local.get $a3)) (f32.const 0x1p48)))
        ;; tail columns (unscaled f32 activations), row r's at p + r·tail
        (local.set $c (i32.const 0))
        (block $tdone
          (loop $tl
            (br_if $tdone (i32.ge_u (local.get $c) (local.get $tail)))
            (local.set $xs (f32.load (i32.add (local.get $xo) (i32.shl (local.get $c) (i32.const 1)))))
            (local.set $t (i32.add (local.get $p) (local.get $c)))
            (local.set $s0 (f32.add (local.get $s0) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))) (local.get $xs))))
            (local.set $t (i32.add (local.get $t) (local.get $tail)))
            (local.set $s1 (f32.add (local.get $s1) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))) (local.get $xs))))
            (local.set $t (i32.add (local.get $t) (local.get $tail)))
            (local.set $s2 (f32.add (local.get $s2) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))) (local.get $xs))))
            (local.set $t (i32.add (local.get $t) (local.get $tail)))
            (local.set $s3 (f32.add (local.get $s3) (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))) (local.get $xs))))
            (local.set $c (i32.add (local.get $c) (i32.const 2)))
            (br $tl)))
        (f32.store offset=0 (local.get $out) (local.get $s0))
        (f32.store offset=4 (local.get $out) (local.get $s1))
        (f32.store offset=8 (local.get $out) (local.get $s2))
        (f32.store offset=12 (local.get $out) (local.get $s3))
        (local.set $p (i32.add (local.get $p) (i32.shl (local.get $tail) (i32.const 2))))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $g (i32.add (local.get $g) (i32.const 1)))
        (br $gl))))

  ;; 4 f16 scales at $p (8 bytes) → f32x4 times d_x: widened exactly like f16 weights (bits of d·2^-112),
  ;; times 2^112 (exact), then one rounding for d_w·d_x, as the row-major kernels' table value · d_x.
  ;; (Written out in the kernels below; V8 does not inline wasm calls.)

  ;; q8_0, 4 packed rows per group.
  (func $g4_q8_0 (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)
    (local $g i32) (local $p i32) (local $nb i32) (local $b i32) (local $xq i32) (local $xd i32)
    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $m v128) (local $acc v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $p (local.get $w))
    (block $gdone
      (loop $gl
        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))
        (local.set $xq (local.get $x))
        (local.set $xd (i32.add (local.get $x) (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (local.get $nb) (i32.const 2)))))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $b (i32.const 0))
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
            (local.set $x0 (v128.load offset=0 (local.get $xq)))
            (local.set $x1 (v128.load offset=16 (local.get $xq)))
            (local.set $x2 (v128.load offset=32 (local.get $xq)))
            (local.set $x3 (v128.load offset=48 (local.get $xq)))
            (local.set $s0 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=8 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=16 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=24 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=32 (local.get $p)) (local.get $x3)))))
            (local.set $s1 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=40 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=48 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=56 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=64 (local.get $p)) (local.get $x3)))))
            (local.set $s2 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=72 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=80 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=88 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=96 (local.get $p)) (local.get $x3)))))
            (local.set $s3 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=104 (local.get $p)) (local.get $x0))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=112 (local.get $p)) (local.get $x1)))
              (i32x4.add (i32x4.dot_i16x8_s (v128.load8x8_s offset=120 (local.get $p)) (local.get $x2))
                         (i32x4.dot_i16x8_s (v128.load8x8_s offset=128 (local.get $p)) (local.get $x3)))))
            ;; transpose-add: lane r of t0 = row r's block total (exact integers)
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
            (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))
                                      (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $t0))
              (f32x4.mul
                (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $p)) (i32.const 16)) (i32.const 3)) (local.get $m))
                           (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))
                (f32x4.splat (f32.load (local.get $xd)))))))
            (local.set $p (i32.add (local.get $p) (i32.const 136)))
            (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
            (local.set $xd (i32.add (local.get $xd) (i32.const 4)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $l)))
        (v128.store (local.get $out) (local.get $acc))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $g (i32.add (local.get $g) (i32.const 1)))
        (br $gl))))

  ;; q4_0, 4 packed rows per group.
  (func $g4_q4_0 (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)
    (local $g i32) (local $p i32) (local $nb i32) (local $b i32) (local $xq i32) (local $xc i32)
    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $m v128) (local $acc v128) (local $q v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $p (local.get $w))
    (block $gdone
      (loop $gl
        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))
        (local.set $xq (local.get $x))
        (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $b (i32.const 0))
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
            (local.set $x0 (v128.load offset=0 (local.get $xq)))
            (local.set $x1 (v128.load offset=16 (local.get $xq)))
            (local.set $x2 (v128.load offset=32 (local.get $xq)))
            (local.set $x3 (v128.load offset=48 (local.get $xq)))
            (local.set $q (v128.load8x8_u offset=8 (local.get $p)))
            (local.set $s0 (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2))))
            (local.set $q (v128.load8x8_u offset=16 (local.get $p)))
            (local.set $s0 (i32x4.add (local.get $s0) (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))
            (local.set $q (v128.load8x8_u offset=24 (local.get $p)))
            (local.set $s1 (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2))))
            (local.set $q (v128.load8x8_u offset=32 (local.get $p)))
            (local.set $s1 (i32x4.add (local.get $s1) (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))
            (local.set $q (v128.load8x8_u offset=40 (local.get $p)))
            (local.set $s2 (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2))))
            (local.set $q (v128.load8x8_u offset=48 (local.get $p)))
            (local.set $s2 (i32x4.add (local.get $s2) (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))
            (local.set $q (v128.load8x8_u offset=56 (local.get $p)))
            (local.set $s3 (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2))))
            (local.set $q (v128.load8x8_u offset=64 (local.get $p)))
            (local.set $s3 (i32x4.add (local.get $s3) (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))
            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))
            (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))
                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))
            (local.set $t0 (i32x4.sub
              (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))
                         (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1)))
              (i32x4.splat (i32.load (local.get $xc)))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $t0))
              (f32x4.mul
                (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $p)) (i32.const 16)) (i32.const 3)) (local.get $m))
                           (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))
                (f32x4.splat (f32.load (i32.add (local.get $xc) (i32.shl (local.get $nb) (i32.const 2)))))))))
            (local.set $p (i32.add (local.get $p) (i32.const 72)))
            (local.set $xq (i32.add (local.get $xq) (i32.const 64)))
            (local.set $xc (i32.add (local.get $xc) (i32.const 4)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $l)))
        (v128.store (local.get $out) (local.get $acc))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $g (i32.add (local.get $g) (i32.const 1)))
        (br $gl))))

  ;; >>> qtile (generated by wasm/qtiles.ts)
  ;; ---------------------------------------------------------------- q8_0 / q4_0 prompt batches
  ;; Packed weights, n >= 2 tokens ($rows_packed): two 4-row groups at a time are widened once into the
  ;; calling thread's scratch ($qwiden32 each; a chunk's last odd group alone, $qwiden16), then tiles of
  ;; 4 tokens run against them ($qtiles8 / $qtiles4; the last tile takes the 1-3 left), so each widened
  ;; weight vector is loaded once per 4 tokens and each activation splat feeds both groups.
  ;; Widened block (32 columns): 16 i16x8 vectors, vector k holding columns 2k, 2k+1 of the group's 4 rows
  ;; (row r in i32 lane r), then the 4 rows' f32 scales d_w, widened exactly as the 1-token kernels do.
  ;; Two groups side by side: vector k of group A at 32k, of group B at 32k + 16, scales at 512 and 528
  ;; (544 bytes per block); one group: 16k and 256 (272 bytes).
  ;; One i32x4.dot_i16x8_s of vector k with the token's pair (x[2k], x[2k+1]) splatted adds 2 products to
  ;; each row's lane: 16 dots give the 4 rows' exact block totals, with no transpose. q8_0 widens as is;
  ;; q4_0 to match its activation form (quant_q8): column j < 16 carries b − 136 = (lo − 8) + 16·(hi − 8)
  ;; for the byte b = lo + 16·hi, column j + 16 carries hi − 8, against x[j] and x[j+16] − 16·x[j]: that is
  ;; (lo − 8)·x[j] + (hi − 8)·x[j+16], the −8 included (no correction term). Integer totals are exact, and
  ;; each block then adds f32(isum)·(d_w·d_x) to the f32 sum exactly as $g4_q8_0 / $g4_q4_0 do, so a batch
  ;; gives the 1-token results bit for bit.
  ;; Activations in tile layout (quant_tiles, once per matmul): tiles of 4 tokens (the last: the rest); in
  ;; a tile of t tokens, per block 68·t bytes: for k < 16 each token's pair as one i32, then each token's
  ;; f32 d_x. One pointer with immediate offsets then addresses the whole tile.
  ;; Tile shape by measurement (1 thread, the ~100M bench model's 7 matrices at 64 tokens, hot, CPU
  ;; time; the 1-token kernels per token: 16.6 GMAC/s): 4 rows x 4 tokens with all 16 k-steps unrolled
  ;; ~15.7 (TurboFan hoisted every load to the top of the block and spilled most of them); with a k loop
  ;; of 2 steps 26 (4x2 23.5, 4x6 26, 4x8 20.6 and 4 steps per iteration 20: spills); 8 rows x 4 tokens
  ;; from the tile layout, 1 step per iteration, 33-34 (8x3 32-33, 8x2 with 2 steps 31-32, 8x4 with 2
  ;; steps 26.5, 8x5 25).
  ;; One packed group (w: its first block) widened for $qtile4x*: vector k at d + 16k, scales at d + 256;
  ;; blocks 272 bytes apart. q4: 1 for q4_0 weights.
  (func $qwiden16 (param $w i32) (param $nb i32) (param $d i32) (param $q4 i32)
    (local $b i32) (local $m v128) (local $u v128) (local $v v128)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (v128.store offset=256 (local.get $d) (f32x4.mul
          (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $w)) (i32.const 16)) (i32.const 3)) (local.get $m))
          (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112)))
        (if (local.get $q4)
          (then
            ;; row r's 16 bytes b (columns j < 16), then their high nibbles (columns j + 16)
            (local.set $r0 (v128.load offset=8 (local.get $w)))
            (local.set $r1 (v128.load offset=24 (local.get $w)))
            (local.set $r2 (v128.load offset=40 (local.get $w)))
            (local.set $r3 (v128.load offset=56 (local.get $w)))
            (local.set $h0 (i8x16.shr_u (local.get $r0) (i32.const 4)))
            (local.set $h1 (i8x16.shr_u (local.get $r1) (i32.const 4)))
            (local.set $h2 (i8x16.shr_u (local.get $r2) (i32.const 4)))
            (local.set $h3 (i8x16.shr_u (local.get $r3) (i32.const 4)))
            ;; pairs of the 4 rows interleaved: (row 0, row 1) and (row 2, row 3) by 16 bits, then by 32
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r2) (local.get $r3)))
            (v128.store offset=0 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=16 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=32 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=48 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r2) (local.get $r3)))
            (v128.store offset=64 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=80 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=96 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=112 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h2) (local.get $h3)))
            (v128.store offset=128 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=144 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=160 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=176 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h2) (local.get $h3)))
            (v128.store offset=192 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=208 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=224 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=240 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (local.set $w (i32.add (local.get $w) (i32.const 72))))
          (else
            ;; row r's 32 int8: columns 0..15, 16..31
            (local.set $r0 (v128.load offset=8 (local.get $w)))
            (local.set $r1 (v128.load offset=40 (local.get $w)))
            (local.set $r2 (v128.load offset=72 (local.get $w)))
            (local.set $r3 (v128.load offset=104 (local.get $w)))
            (local.set $h0 (v128.load offset=24 (local.get $w)))
            (local.set $h1 (v128.load offset=56 (local.get $w)))
            (local.set $h2 (v128.load offset=88 (local.get $w)))
            (local.set $h3 (v128.load offset=120 (local.get $w)))
            ;; pairs of the 4 rows interleaved: (row 0, row 1) and (row 2, row 3) by 16 bits, then by 32
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r2) (local.get $r3)))
            (v128.store offset=0 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=16 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=32 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=48 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r2) (local.get $r3)))
            (v128.store offset=64 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=80 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=96 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=112 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h2) (local.get $h3)))
            (v128.store offset=128 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=144 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=160 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=176 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h2) (local.get $h3)))
            (v128.store offset=192 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=208 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=224 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=240 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $w (i32.add (local.get $w) (i32.const 136)))))
        (local.set $d (i32.add (local.get $d) (i32.const 272)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l))))

  ;; One packed group (w: its first block) widened for $qtile8x*: vector k at d + 32k, scales at d + 512;
  ;; blocks 544 bytes apart. q4: 1 for q4_0 weights.
  (func $qwiden32 (param $w i32) (param $nb i32) (param $d i32) (param $q4 i32)
    (local $b i32) (local $m v128) (local $u v128) (local $v v128)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)
    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (v128.store offset=512 (local.get $d) (f32x4.mul
          (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $w)) (i32.const 16)) (i32.const 3)) (local.get $m))
          (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112)))
        (if (local.get $q4)
          (then
            ;; row r's 16 bytes b (columns j < 16), then their high nibbles (columns j + 16)
            (local.set $r0 (v128.load offset=8 (local.get $w)))
            (local.set $r1 (v128.load offset=24 (local.get $w)))
            (local.set $r2 (v128.load offset=40 (local.get $w)))
            (local.set $r3 (v128.load offset=56 (local.get $w)))
            (local.set $h0 (i8x16.shr_u (local.get $r0) (i32.const 4)))
            (local.set $h1 (i8x16.shr_u (local.get $r1) (i32.const 4)))
            (local.set $h2 (i8x16.shr_u (local.get $r2) (i32.const 4)))
            (local.set $h3 (i8x16.shr_u (local.get $r3) (i32.const 4)))
            ;; pairs of the 4 rows interleaved: (row 0, row 1) and (row 2, row 3) by 16 bits, then by 32
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r2) (local.get $r3)))
            (v128.store offset=0 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=32 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=64 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=96 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r2) (local.get $r3)))
            (v128.store offset=128 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=160 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=192 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (v128.store offset=224 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 136 136 136 136 136 136 136 136)))
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h2) (local.get $h3)))
            (v128.store offset=256 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=288 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=320 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=352 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h2) (local.get $h3)))
            (v128.store offset=384 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=416 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=448 (local.get $d) (i16x8.sub (i16x8.extend_low_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (v128.store offset=480 (local.get $d) (i16x8.sub (i16x8.extend_high_i8x16_u (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))) (v128.const i16x8 8 8 8 8 8 8 8 8)))
            (local.set $w (i32.add (local.get $w) (i32.const 72))))
          (else
            ;; row r's 32 int8: columns 0..15, 16..31
            (local.set $r0 (v128.load offset=8 (local.get $w)))
            (local.set $r1 (v128.load offset=40 (local.get $w)))
            (local.set $r2 (v128.load offset=72 (local.get $w)))
            (local.set $r3 (v128.load offset=104 (local.get $w)))
            (local.set $h0 (v128.load offset=24 (local.get $w)))
            (local.set $h1 (v128.load offset=56 (local.get $w)))
            (local.set $h2 (v128.load offset=88 (local.get $w)))
            (local.set $h3 (v128.load offset=120 (local.get $w)))
            ;; pairs of the 4 rows interleaved: (row 0, row 1) and (row 2, row 3) by 16 bits, then by 32
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $r2) (local.get $r3)))
            (v128.store offset=0 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=32 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=64 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=96 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r0) (local.get $r1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $r2) (local.get $r3)))
            (v128.store offset=128 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=160 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=192 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=224 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23 (local.get $h2) (local.get $h3)))
            (v128.store offset=256 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=288 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=320 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=352 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $u (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h0) (local.get $h1)))
            (local.set $v (i8x16.shuffle 8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31 (local.get $h2) (local.get $h3)))
            (v128.store offset=384 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=416 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $u) (local.get $v))))
            (v128.store offset=448 (local.get $d) (i16x8.extend_low_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (v128.store offset=480 (local.get $d) (i16x8.extend_high_i8x16_s (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $u) (local.get $v))))
            (local.set $w (i32.add (local.get $w) (i32.const 136)))))
        (local.set $d (i32.add (local.get $d) (i32.const 544)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l))))

  ;; 4 rows x 1 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 4 outputs.
  (func $qtile4x1 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 64)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $w0 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 8)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 16)))
        (local.set $x (i32.add (local.get $x) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
  )

  ;; 4 rows x 2 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 4 outputs.
  (func $qtile4x2 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 128)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $w0 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=8 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=12 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 16)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 16)))
        (local.set $x (i32.add (local.get $x) (i32.const 8)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
  )

  ;; 4 rows x 3 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 4 outputs.
  (func $qtile4x3 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128) (local $a02 v128) (local $f02 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $a02 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 192)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=8 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $w0 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=12 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=16 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=20 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 24)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=8 (local.get $x))))
        (local.set $f02 (f32x4.add (local.get $f02)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a02)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 16)))
        (local.set $x (i32.add (local.get $x) (i32.const 12)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f02))
  )

  ;; 4 rows x 4 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 4 outputs.
  (func $qtile4x4 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128) (local $a02 v128) (local $f02 v128) (local $a03 v128) (local $f03 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $a02 (v128.const i32x4 0 0 0 0))
        (local.set $a03 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 256)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=8 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=12 (local.get $x)))
          (local.set $a03 (i32x4.add (local.get $a03) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $w0 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=16 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=20 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=24 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $c (v128.load32_splat offset=28 (local.get $x)))
          (local.set $a03 (i32x4.add (local.get $a03) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 32)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=8 (local.get $x))))
        (local.set $f02 (f32x4.add (local.get $f02)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a02)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=12 (local.get $x))))
        (local.set $f03 (f32x4.add (local.get $f03)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a03)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 16)))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f02))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f03))
  )

  ;; All n tokens of the batch against 4 widened rows: tiles of 4, then one of the rest.
  (func $qtiles4 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32) (param $n i32)
    (block $done
      (loop $l
        (br_if $done (i32.lt_u (local.get $n) (i32.const 4)))
        (call $qtile4x4 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))
        (local.set $x (i32.add (local.get $x) (i32.mul (local.get $nb) (i32.const 272))))
        (local.set $out (i32.add (local.get $out) (i32.mul (local.get $os) (i32.const 4))))
        (local.set $n (i32.sub (local.get $n) (i32.const 4)))
        (br $l)))
    (if (i32.eq (local.get $n) (i32.const 1)) (then (call $qtile4x1 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
    (if (i32.eq (local.get $n) (i32.const 2)) (then (call $qtile4x2 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
    (if (i32.eq (local.get $n) (i32.const 3)) (then (call $qtile4x3 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
  )

  ;; 8 rows x 1 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 8 outputs.
  (func $qtile8x1 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $w1 v128) (local $dw1 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a10 v128) (local $f10 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a10 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 64)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $w1 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a10 (i32x4.add (local.get $a10) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 4)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dw1 (v128.load offset=16 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f10 (f32x4.add (local.get $f10)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a10)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $x (i32.add (local.get $x) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (v128.store offset=16 (local.get $out) (local.get $f10))
  )

  ;; 8 rows x 2 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 8 outputs.
  (func $qtile8x2 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $w1 v128) (local $dw1 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128) (local $a10 v128) (local $f10 v128) (local $a11 v128) (local $f11 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $a10 (v128.const i32x4 0 0 0 0))
        (local.set $a11 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 128)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $w1 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a10 (i32x4.add (local.get $a10) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a11 (i32x4.add (local.get $a11) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 8)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dw1 (v128.load offset=16 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f10 (f32x4.add (local.get $f10)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a10)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f11 (f32x4.add (local.get $f11)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a11)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $x (i32.add (local.get $x) (i32.const 8)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (v128.store offset=16 (local.get $out) (local.get $f10))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
    (v128.store offset=16 (local.get $out) (local.get $f11))
  )

  ;; 8 rows x 3 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 8 outputs.
  (func $qtile8x3 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $w1 v128) (local $dw1 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128) (local $a02 v128) (local $f02 v128) (local $a10 v128) (local $f10 v128) (local $a11 v128) (local $f11 v128) (local $a12 v128) (local $f12 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $a02 (v128.const i32x4 0 0 0 0))
        (local.set $a10 (v128.const i32x4 0 0 0 0))
        (local.set $a11 (v128.const i32x4 0 0 0 0))
        (local.set $a12 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 192)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $w1 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a10 (i32x4.add (local.get $a10) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a11 (i32x4.add (local.get $a11) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=8 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a12 (i32x4.add (local.get $a12) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 12)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dw1 (v128.load offset=16 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f10 (f32x4.add (local.get $f10)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a10)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f11 (f32x4.add (local.get $f11)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a11)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=8 (local.get $x))))
        (local.set $f02 (f32x4.add (local.get $f02)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a02)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f12 (f32x4.add (local.get $f12)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a12)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $x (i32.add (local.get $x) (i32.const 12)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (v128.store offset=16 (local.get $out) (local.get $f10))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
    (v128.store offset=16 (local.get $out) (local.get $f11))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f02))
    (v128.store offset=16 (local.get $out) (local.get $f12))
  )

  ;; 8 rows x 4 token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's 8 outputs.
  (func $qtile8x4 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)
    (local $b i32) (local $end i32) (local $w0 v128) (local $dw0 v128) (local $w1 v128) (local $dw1 v128) (local $c v128) (local $dx v128)
    (local $a00 v128) (local $f00 v128) (local $a01 v128) (local $f01 v128) (local $a02 v128) (local $f02 v128) (local $a03 v128) (local $f03 v128) (local $a10 v128) (local $f10 v128) (local $a11 v128) (local $f11 v128) (local $a12 v128) (local $f12 v128) (local $a13 v128) (local $f13 v128)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $a00 (v128.const i32x4 0 0 0 0))
        (local.set $a01 (v128.const i32x4 0 0 0 0))
        (local.set $a02 (v128.const i32x4 0 0 0 0))
        (local.set $a03 (v128.const i32x4 0 0 0 0))
        (local.set $a10 (v128.const i32x4 0 0 0 0))
        (local.set $a11 (v128.const i32x4 0 0 0 0))
        (local.set $a12 (v128.const i32x4 0 0 0 0))
        (local.set $a13 (v128.const i32x4 0 0 0 0))
        (local.set $end (i32.add (local.get $x) (i32.const 256)))
        (loop $kl
          (local.set $w0 (v128.load offset=0 (local.get $s)))
          (local.set $w1 (v128.load offset=16 (local.get $s)))
          (local.set $c (v128.load32_splat offset=0 (local.get $x)))
          (local.set $a00 (i32x4.add (local.get $a00) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a10 (i32x4.add (local.get $a10) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=4 (local.get $x)))
          (local.set $a01 (i32x4.add (local.get $a01) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a11 (i32x4.add (local.get $a11) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=8 (local.get $x)))
          (local.set $a02 (i32x4.add (local.get $a02) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a12 (i32x4.add (local.get $a12) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $c (v128.load32_splat offset=12 (local.get $x)))
          (local.set $a03 (i32x4.add (local.get $a03) (i32x4.dot_i16x8_s (local.get $w0) (local.get $c))))
          (local.set $a13 (i32x4.add (local.get $a13) (i32x4.dot_i16x8_s (local.get $w1) (local.get $c))))
          (local.set $s (i32.add (local.get $s) (i32.const 32)))
          (local.set $x (i32.add (local.get $x) (i32.const 16)))
          (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))
        (local.set $dw0 (v128.load offset=0 (local.get $s)))
        (local.set $dw1 (v128.load offset=16 (local.get $s)))
        (local.set $dx (f32x4.splat (f32.load offset=0 (local.get $x))))
        (local.set $f00 (f32x4.add (local.get $f00)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a00)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f10 (f32x4.add (local.get $f10)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a10)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=4 (local.get $x))))
        (local.set $f01 (f32x4.add (local.get $f01)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a01)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f11 (f32x4.add (local.get $f11)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a11)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=8 (local.get $x))))
        (local.set $f02 (f32x4.add (local.get $f02)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a02)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f12 (f32x4.add (local.get $f12)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a12)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $dx (f32x4.splat (f32.load offset=12 (local.get $x))))
        (local.set $f03 (f32x4.add (local.get $f03)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a03)) (f32x4.mul (local.get $dw0) (local.get $dx)))))
        (local.set $f13 (f32x4.add (local.get $f13)
          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a13)) (f32x4.mul (local.get $dw1) (local.get $dx)))))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $l)))
    (v128.store offset=0 (local.get $out) (local.get $f00))
    (v128.store offset=16 (local.get $out) (local.get $f10))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f01))
    (v128.store offset=16 (local.get $out) (local.get $f11))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f02))
    (v128.store offset=16 (local.get $out) (local.get $f12))
    (local.set $out (i32.add (local.get $out) (local.get $os)))
    (v128.store offset=0 (local.get $out) (local.get $f03))
    (v128.store offset=16 (local.get $out) (local.get $f13))
  )

  ;; All n tokens of the batch against 8 widened rows: tiles of 4, then one of the rest.
  (func $qtiles8 (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32) (param $n i32)
    (block $done
      (loop $l
        (br_if $done (i32.lt_u (local.get $n) (i32.const 4)))
        (call $qtile8x4 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))
        (local.set $x (i32.add (local.get $x) (i32.mul (local.get $nb) (i32.const 272))))
        (local.set $out (i32.add (local.get $out) (i32.mul (local.get $os) (i32.const 4))))
        (local.set $n (i32.sub (local.get $n) (i32.const 4)))
        (br $l)))
    (if (i32.eq (local.get $n) (i32.const 1)) (then (call $qtile8x1 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
    (if (i32.eq (local.get $n) (i32.const 2)) (then (call $qtile8x2 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
    (if (i32.eq (local.get $n) (i32.const 3)) (then (call $qtile8x3 (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))))
  )

  ;; n tokens of quant_q8 output at src (cols·2 + (cols/32)·8 bytes each) into tiles of 4 tokens at dst.
  (func (export "quant_tiles") (param $src i32) (param $dst i32) (param $cols i32) (param $n i32)
    (local $xs i32) (local $nb i32) (local $t0 i32) (local $tn i32) (local $b i32) (local $k i32) (local $t i32)
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $xs (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (local.get $nb) (i32.const 3))))
    (block $tdone
      (loop $tl
        (br_if $tdone (i32.ge_u (local.get $t0) (local.get $n)))
        (local.set $tn (i32.sub (local.get $n) (local.get $t0)))
        (if (i32.gt_u (local.get $tn) (i32.const 4)) (then (local.set $tn (i32.const 4))))
        (local.set $b (i32.const 0))
        (block $bdone
          (loop $bl
            (br_if $bdone (i32.ge_u (local.get $b) (local.get $nb)))
            (local.set $k (i32.const 0))
            (block $kdone
              (loop $kl
                (br_if $kdone (i32.ge_u (local.get $k) (i32.const 16)))
                (local.set $t (i32.const 0))
                (block $idone
                  (loop $il
                    (br_if $idone (i32.ge_u (local.get $t) (local.get $tn)))
                    (i32.store (local.get $dst) (i32.load (i32.add
                      (i32.add (local.get $src) (i32.mul (i32.add (local.get $t0) (local.get $t)) (local.get $xs)))
                      (i32.add (i32.shl (local.get $b) (i32.const 6)) (i32.shl (local.get $k) (i32.const 2))))))
                    (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
                    (local.set $t (i32.add (local.get $t) (i32.const 1)))
                    (br $il)))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (br $kl)))
            (local.set $t (i32.const 0))
            (block $ddone
              (loop $dl
                (br_if $ddone (i32.ge_u (local.get $t) (local.get $tn)))
                (f32.store (local.get $dst) (f32.load (i32.add
                  (i32.add (local.get $src) (i32.mul (i32.add (local.get $t0) (local.get $t)) (local.get $xs)))
                  (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (i32.add (local.get $nb) (local.get $b)) (i32.const 2))))))
                (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
                (local.set $t (i32.add (local.get $t) (i32.const 1)))
                (br $dl)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $bl)))
        (local.set $t0 (i32.add (local.get $t0) (local.get $tn)))
        (br $tl))))
  ;; <<< qtile

  ;; ---------------------------------------------------------------- read bandwidth probe
  ;; Reads rowBytes (a multiple of 64) per row with one integer add per 16 bytes: the memory-read
  ;; baseline the benchmark compares weight streaming against, through the same row split and threads.
  (func $dot4_read (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (local $end i32) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $r i32)
    (local.set $end (i32.add (local.get $w) (i32.shl (local.get $rb) (i32.const 2))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $w) (local.get $end)))
        (local.set $a0 (i32x4.add (local.get $a0) (v128.load offset=0 (local.get $w))))
        (local.set $a1 (i32x4.add (local.get $a1) (v128.load offset=16 (local.get $w))))
        (local.set $a2 (i32x4.add (local.get $a2) (v128.load offset=32 (local.get $w))))
        (local.set $a3 (i32x4.add (local.get $a3) (v128.load offset=48 (local.get $w))))
        (local.set $w (i32.add (local.get $w) (i32.const 64)))
        (br $l)))
    (local.set $a0 (i32x4.add (i32x4.add (local.get $a0) (local.get $a1)) (i32x4.add (local.get $a2) (local.get $a3))))
    (i32.store (local.get $out) (i32x4.extract_lane 0 (local.get $a0))))

  (func $dot1_read (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)
    (call $dot4_read (local.get $w) (i32.shr_u (local.get $rb) (i32.const 2)) (local.get $x) (local.get $cols) (local.get $out)))

  ;; ---------------------------------------------------------------- activation preparation
  ;; Per token (n of them, cols floats apart): even/odd order per group of 8 columns, times $scale;
  ;; the cols%8 tail is copied unscaled. f16 passes 2^64, bf16 passes 1.
  (func (export "prep_pairs") (param $x i32) (param $dst i32) (param $cols i32) (param $n i32) (param $scale f32)
    (local $b i32) (local $c i32) (local $s i32) (local $d i32) (local $v0 v128) (local $v1 v128) (local $k v128)
    (local $full i32)
    (local.set $k (f32x4.splat (local.get $scale)))
    (local.set $full (i32.and (local.get $cols) (i32.const -8)))
    (block $bdone
      (loop $bl
        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))
        (local.set $s (i32.add (local.get $x) (i32.shl (i32.mul (local.get $b) (local.get $cols)) (i32.const 2))))
        (local.set $d (i32.add (local.get $dst) (i32.shl (i32.mul (local.get $b) (local.get $cols)) (i32.const 2))))
        (local.set $c (i32.const 0))
        (block $cdone
          (loop $cl
            (br_if $cdone (i32.ge_u (local.get $c) (local.get $full)))
            (local.set $v0 (v128.load offset=0 (local.get $s)))
            (local.set $v1 (v128.load offset=16 (local.get $s)))
            (v128.store offset=0 (local.get $d) (f32x4.mul (local.get $k)
              (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $v0) (local.get $v1))))
            (v128.store offset=16 (local.get $d) (f32x4.mul (local.get $k)
              (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $v0) (local.get $v1))))
            (local.set $s (i32.add (local.get $s) (i32.const 32)))
            (local.set $d (i32.add (local.get $d) (i32.const 32)))
            (local.set $c (i32.add (local.get $c) (i32.const 8)))
            (br $cl)))
        (block $tdone
          (loop $tl
            (br_if $tdone (i32.ge_u (local.get $c) (local.get $cols)))
            (f32.store (local.get $d) (f32.load (local.get $s)))
            (local.set $s (i32.add (local.get $s) (i32.const 4)))
            (local.set $d (i32.add (local.get $d) (i32.const 4)))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $tl)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $bl))))

  ;; f32 -> nearest f16 value, as f32 (round to nearest even; finite range only).
  (func $round_f16 (param $v f32) (result f32)
    (local $bits i32)
    (if (result f32) (f32.lt (local.get $v) (f32.const 0x1p-14))
      (then (f32.mul (f32.nearest (f32.mul (local.get $v) (f32.const 0x1p24))) (f32.const 0x1p-24)))
      (else
        (local.set $bits (i32.reinterpret_f32 (local.get $v)))
        (f32.reinterpret_i32 (i32.and
          (i32.add (local.get $bits) (i32.add (i32.const 0xFFF) (i32.and (i32.shr_u (local.get $bits) (i32.const 13)) (i32.const 1))))
          (i32.const 0xFFFFE000))))))

  (func (export "round_f16") (param $v f32) (result f32) (call $round_f16 (local.get $v)))

  ;; Quantize n tokens of cols floats (cols % 32 == 0) into the 8-bit activation format; each token takes
  ;; cols*2 + (cols/32)*8 bytes at dst: cols i16 values, then per block the i32 correction 8·Σq (q4_0's
  ;; −8), then per block the f32 scale. $q4 (1 for q4_0 weights): each block's second half is stored
  ;; as q[j+16] − 16·q[j] (see the q8_0 / q4_0 kernels); |·| ≤ 127·17 fits i16.
  (func (export "quant_q8") (param $x i32) (param $dst i32) (param $cols i32) (param $n i32) (param $q4 i32)
    (local $b i32) (local $blk i32) (local $nb i32) (local $s i32) (local $q i32) (local $ds i32) (local $dc i32)
    (local $q0 v128) (local $q1 v128) (local $q2 v128) (local $q3 v128) (local $eight v128)
    (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128) (local $v4 v128) (local $v5 v128) (local $v6 v128) (local $v7 v128)
    (local $mx v128) (local $amax f32) (local $d f32) (local $id v128)
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $eight (v128.const i16x8 8 8 8 8 8 8 8 8))
    (local.set $s (local.get $x))
    (local.set $q (local.get $dst))
    (block $bdone
      (loop $bl
        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))
        (local.set $dc (i32.add (local.get $q) (i32.shl (local.get $cols) (i32.const 1))))
        (local.set $ds (i32.add (local.get $dc) (i32.shl (local.get $nb) (i32.const 2))))
        (local.set $blk (i32.const 0))
        (block $kdone
          (loop $kl
            (br_if $kdone (i32.ge_u (local.get $blk) (local.get $nb)))
            (local.set $v0 (v128.load offset=0 (local.get $s)))
            (local.set $v1 (v128.load offset=16 (local.get $s)))
            (local.set $v2 (v128.load offset=32 (local.get $s)))
            (local.set $v3 (v128.load offset=48 (local.get $s)))
            (local.set $v4 (v128.load offset=64 (local.get $s)))
            (local.set $v5 (v128.load offset=80 (local.get $s)))
            (local.set $v6 (v128.load offset=96 (local.get $s)))
            (local.set $v7 (v128.load offset=112 (local.get $s)))
            (local.set $mx (f32x4.max
              (f32x4.max (f32x4.max (f32x4.abs (local.get $v0)) (f32x4.abs (local.get $v1)))
                         (f32x4.max (f32x4.abs (local.get $v2)) (f32x4.abs (local.get $v3))))
              (f32x4.max (f32x4.max (f32x4.abs (local.get $v4)) (f32x4.abs (local.get $v5)))
                         (f32x4.max (f32x4.abs (local.get $v6)) (f32x4.abs (local.get $v7))))))
            (local.set $amax (f32.max
              (f32.max (f32x4.extract_lane 0 (local.get $mx)) (f32x4.extract_lane 1 (local.get $mx)))
              (f32.max (f32x4.extract_lane 2 (local.get $mx)) (f32x4.extract_lane 3 (local.get $mx)))))
            (local.set $d (f32.div (local.get $amax) (f32.const 127)))
            ;; 127/amax rather than 1/d, as llama.cpp's x86 quantize_row_q8_0 does
            (local.set $id (f32x4.splat
              (if (result f32) (f32.gt (local.get $amax) (f32.const 0))
                (then (f32.div (f32.const 127) (local.get $amax)))
                (else (f32.const 0)))))
            (f32.store (local.get $ds) (call $round_f16 (local.get $d)))
            (local.set $q0 (i16x8.narrow_i32x4_s
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v0) (local.get $id))))
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v1) (local.get $id))))))
            (v128.store offset=0 (local.get $q) (local.get $q0))
            (local.set $q1 (i16x8.narrow_i32x4_s
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v2) (local.get $id))))
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v3) (local.get $id))))))
            (v128.store offset=16 (local.get $q) (local.get $q1))
            (local.set $q2 (i16x8.narrow_i32x4_s
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v4) (local.get $id))))
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v5) (local.get $id))))))
            (v128.store offset=32 (local.get $q) (local.get $q2))
            (local.set $q3 (i16x8.narrow_i32x4_s
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v6) (local.get $id))))
              (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (local.get $v7) (local.get $id))))))
            (v128.store offset=48 (local.get $q) (local.get $q3))
            (if (local.get $q4)
              (then
                (v128.store offset=32 (local.get $q) (i16x8.sub (local.get $q2) (i16x8.shl (local.get $q0) (i32.const 4))))
                (v128.store offset=48 (local.get $q) (i16x8.sub (local.get $q3) (i16x8.shl (local.get $q1) (i32.const 4))))))
            (i32.store (local.get $dc) (call $hsum_i32 (i32x4.add
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q0) (local.get $eight)) (i32x4.dot_i16x8_s (local.get $q1) (local.get $eight)))
              (i32x4.add (i32x4.dot_i16x8_s (local.get $q2) (local.get $eight)) (i32x4.dot_i16x8_s (local.get $q3) (local.get $eight))))))
            (local.set $s (i32.add (local.get $s) (i32.const 128)))
            (local.set $q (i32.add (local.get $q) (i32.const 64)))
            (local.set $dc (i32.add (local.get $dc) (i32.const 4)))
            (local.set $ds (i32.add (local.get $ds) (i32.const 4)))
            (local.set $blk (i32.add (local.get $blk) (i32.const 1)))
            (br $kl)))
        ;; next token: skip this token's correction and scale arrays
        (local.set $q (i32.add (local.get $q) (i32.shl (local.get $nb) (i32.const 3))))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $bl))))

  ;; ---------------------------------------------------------------- attention over a KV cache
  ;; Parameters at 128 + 4*i (i32 unless noted):
  ;;   0 q  1 out  2 k cache  3 v cache  4 n  5 pos0  6 heads  7 headDim  8 kv row floats (kvHeads·hd)
  ;;   9 group  10 headOffset  11 kvOffset  12 scale (f32)  13 window (0: none)  14 scratch  15 cap
  ;; Work item i = b·heads + h: query b (position pos0+b) of head h against cache rows first..pos of KV
  ;; head (h + headOffset)/group − kvOffset. Scores live in scratch + i·cap·4, so items are independent.
  ;; Numerics follow the reference loop: s·scale stored as f32, e = exp(s − max) stored as f32, Σe in
  ;; f64, p = f32(e/Σ), out += p·v in f32 — except that exp is the f32 SIMD $expf4 (≈1 ulp; it was an
  ;; f64 series per score, a third of the attention time), 4 scores at a time.

  ;; The softmax's exp (the f32 SIMD $expf4, lane 0), exported for tests.
  (func (export "exp_neg") (param $x f64) (result f64)
    (f64.promote_f32 (f32x4.extract_lane 0 (call $expf4 (f32x4.splat (f32.demote_f64 (local.get $x)))))))

  (func $attn_item (param $i i32)
    (local $heads i32) (local $hd i32) (local $b i32) (local $h i32) (local $pos i32) (local $first i32) (local $win i32)
    (local $kvh i32) (local $qp i32) (local $op i32) (local $sc i32) (local $t i32) (local $kp i32) (local $j i32)
    (local $hdv i32) (local $hdb i32) (local $rowb i32) (local $headb i32) (local $scale f32) (local $kbase i32)
    (local $k1 i32) (local $k2 i32) (local $k3 i32) (local $qv v128)
    (local $acc v128) (local $acc1 v128) (local $acc2 v128) (local $acc3 v128) (local $pv v128)
    (local $s f32) (local $s1 f32) (local $s2 f32) (local $s3 f32) (local $max f32) (local $sum f64) (local $e f64) (local $p f32)
    (local $c i32) (local $cend i32) (local $tp i32) (local $vp i32) (local $o0 v128) (local $o1 v128) (local $o2 v128) (local $o3 v128)
    (local.set $heads (i32.load offset=152 (i32.const 0)))
    (local.set $hd (i32.load offset=156 (i32.const 0)))
    (local.set $b (i32.div_u (local.get $i) (local.get $heads)))
    (local.set $h (i32.rem_u (local.get $i) (local.get $heads)))
    (local.set $pos (i32.add (i32.load offset=148 (i32.const 0)) (local.get $b)))
    (local.set $win (i32.load offset=180 (i32.const 0)))
    (if (i32.and (i32.gt_u (local.get $win) (i32.const 0)) (i32.gt_u (i32.add (local.get $pos) (i32.const 1)) (local.get $win)))
      (then (local.set $first (i32.sub (i32.add (local.get $pos) (i32.const 1)) (local.get $win)))))
    (local.set $kvh (i32.sub
      (i32.div_u (i32.add (local.get $h) (i32.load offset=168 (i32.const 0))) (i32.load offset=164 (i32.const 0)))
      (i32.load offset=172 (i32.const 0))))
    (local.set $hdb (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $hdv (i32.shl (i32.and (local.get $hd) (i32.const -4)) (i32.const 2)))
    (local.set $rowb (i32.shl (i32.load offset=160 (i32.const 0)) (i32.const 2)))
    (local.set $headb (i32.mul (local.get $kvh) (local.get $hdb)))
    (local.set $qp (i32.add (i32.load offset=128 (i32.const 0)) (i32.mul (local.get $i) (local.get $hdb))))
    (local.set $op (i32.add (i32.load offset=132 (i32.const 0)) (i32.mul (local.get $i) (local.get $hdb))))
    (local.set $sc (i32.add (i32.load offset=184 (i32.const 0))
      (i32.shl (i32.mul (local.get $i) (i32.load offset=188 (i32.const 0))) (i32.const 2))))
    (local.set $scale (f32.load offset=176 (i32.const 0)))
    ;; scores, 4 cache positions at a time: four independent sums share each q load (each score is
    ;; still summed in its own fixed order: SIMD lanes, horizontal sum, then the hd%4 tail)
    (local.set $max (f32.const -inf))
    (local.set $kbase (i32.add (i32.load offset=136 (i32.const 0)) (local.get $headb)))
    (local.set $t (local.get $first))
    (block $qd
      (loop $ql
        (br_if $qd (i32.gt_u (i32.add (local.get $t) (i32.const 3)) (local.get $pos)))
        (local.set $kp (i32.add (local.get $kbase) (i32.mul (local.get $t) (local.get $rowb))))
        (local.set $k1 (i32.add (local.get $kp) (local.get $rowb)))
        (local.set $k2 (i32.add (local.get $k1) (local.get $rowb)))
        (local.set $k3 (i32.add (local.get $k2) (local.get $rowb)))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $acc1 (v128.const i32x4 0 0 0 0))
        (local.set $acc2 (v128.const i32x4 0 0 0 0))
        (local.set $acc3 (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (block $vd4
          (loop $vl4
            (br_if $vd4 (i32.ge_u (local.get $j) (local.get $hdv)))
            (local.set $qv (v128.load (i32.add (local.get $qp) (local.get $j))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $kp) (local.get $j))))))
            (local.set $acc1 (f32x4.add (local.get $acc1) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $k1) (local.get $j))))))
            (local.set $acc2 (f32x4.add (local.get $acc2) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $k2) (local.get $j))))))
            (local.set $acc3 (f32x4.add (local.get $acc3) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $k3) (local.get $j))))))
            (local.set $j (i32.add (local.get $j) (i32.const 16)))
            (br $vl4)))
        (local.set $s (call $hsum (local.get $acc)))
        (local.set $s1 (call $hsum (local.get $acc1)))
        (local.set $s2 (call $hsum (local.get $acc2)))
        (local.set $s3 (call $hsum (local.get $acc3)))
        (block $td4
          (loop $tl4
            (br_if $td4 (i32.ge_u (local.get $j) (local.get $hdb)))
            (local.set $p (f32.load (i32.add (local.get $qp) (local.get $j))))
            (local.set $s (f32.add (local.get $s) (f32.mul (local.get $p) (f32.load (i32.add (local.get $kp) (local.get $j))))))
            (local.set $s1 (f32.add (local.get $s1) (f32.mul (local.get $p) (f32.load (i32.add (local.get $k1) (local.get $j))))))
            (local.set $s2 (f32.add (local.get $s2) (f32.mul (local.get $p) (f32.load (i32.add (local.get $k2) (local.get $j))))))
            (local.set $s3 (f32.add (local.get $s3) (f32.mul (local.get $p) (f32.load (i32.add (local.get $k3) (local.get $j))))))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $tl4)))
        (local.set $tp (i32.add (local.get $sc) (i32.shl (i32.sub (local.get $t) (local.get $first)) (i32.const 2))))
        (local.set $s (f32.mul (local.get $s) (local.get $scale)))
        (local.set $s1 (f32.mul (local.get $s1) (local.get $scale)))
        (local.set $s2 (f32.mul (local.get $s2) (local.get $scale)))
        (local.set $s3 (f32.mul (local.get $s3) (local.get $scale)))
        (f32.store offset=0 (local.get $tp) (local.get $s))
        (f32.store offset=4 (local.get $tp) (local.get $s1))
        (f32.store offset=8 (local.get $tp) (local.get $s2))
        (f32.store offset=12 (local.get $tp) (local.get $s3))
        (if (f32.gt (local.get $s) (local.get $max)) (then (local.set $max (local.get $s))))
        (if (f32.gt (local.get $s1) (local.get $max)) (then (local.set $max (local.get $s1))))
        (if (f32.gt (local.get $s2) (local.get $max)) (then (local.set $max (local.get $s2))))
        (if (f32.gt (local.get $s3) (local.get $max)) (then (local.set $max (local.get $s3))))
        (local.set $t (i32.add (local.get $t) (i32.const 4)))
        (br $ql)))
    (block $sd
      (loop $sl
        (br_if $sd (i32.gt_u (local.get $t) (local.get $pos)))
        (local.set $kp (i32.add (local.get $kbase) (i32.mul (local.get $t) (local.get $rowb))))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (block $vd
          (loop $vl
            (br_if $vd (i32.ge_u (local.get $j) (local.get $hdv)))
            (local.set $acc (f32x4.add (local.get $acc)
              (f32x4.mul (v128.load (i32.add (local.get $qp) (local.get $j))) (v128.load (i32.add (local.get $kp) (local.get $j))))))
            (local.set $j (i32.add (local.get $j) (i32.const 16)))
            (br $vl)))
        (local.set $s (call $hsum (local.get $acc)))
        (block $td
          (loop $tl
            (br_if $td (i32.ge_u (local.get $j) (local.get $hdb)))
            (local.set $s (f32.add (local.get $s)
              (f32.mul (f32.load (i32.add (local.get $qp) (local.get $j))) (f32.load (i32.add (local.get $kp) (local.get $j))))))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $tl)))
        (local.set $s (f32.mul (local.get $s) (local.get $scale)))
        (f32.store (i32.add (local.get $sc) (i32.shl (i32.sub (local.get $t) (local.get $first)) (i32.const 2))) (local.get $s))
        (if (f32.gt (local.get $s) (local.get $max)) (then (local.set $max (local.get $s))))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $sl)))
    ;; softmax numerators e = exp(s − max), 4 at a time, summed in f64 in position order
    (local.set $tp (local.get $sc))
    (local.set $cend (i32.add (local.get $sc) (i32.shl (i32.add (i32.sub (local.get $pos) (local.get $first)) (i32.const 1)) (i32.const 2))))
    (local.set $pv (f32x4.splat (local.get $max)))
    (block $ed
      (loop $el
        (br_if $ed (i32.gt_u (i32.add (local.get $tp) (i32.const 16)) (local.get $cend)))
        (local.set $o0 (call $expf4 (f32x4.sub (v128.load (local.get $tp)) (local.get $pv))))
        (v128.store (local.get $tp) (local.get $o0))
        (local.set $sum (f64.add (local.get $sum) (f64.promote_f32 (f32x4.extract_lane 0 (local.get $o0)))))
        (local.set $sum (f64.add (local.get $sum) (f64.promote_f32 (f32x4.extract_lane 1 (local.get $o0)))))
        (local.set $sum (f64.add (local.get $sum) (f64.promote_f32 (f32x4.extract_lane 2 (local.get $o0)))))
        (local.set $sum (f64.add (local.get $sum) (f64.promote_f32 (f32x4.extract_lane 3 (local.get $o0)))))
        (local.set $tp (i32.add (local.get $tp) (i32.const 16)))
        (br $el)))
    (block $ed1
      (loop $el1
        (br_if $ed1 (i32.ge_u (local.get $tp) (local.get $cend)))
        (local.set $p (f32x4.extract_lane 0 (call $expf4 (f32x4.splat (f32.sub (f32.load (local.get $tp)) (local.get $max))))))
        (f32.store (local.get $tp) (local.get $p))
        (local.set $sum (f64.add (local.get $sum) (f64.promote_f32 (local.get $p))))
        (local.set $tp (i32.add (local.get $tp) (i32.const 4)))
        (br $el1)))
    ;; probabilities p = f32(e/Σ), in place
    (local.set $tp (local.get $sc))
    (block $pd
      (loop $pl
        (br_if $pd (i32.ge_u (local.get $tp) (local.get $cend)))
        (f32.store (local.get $tp) (f32.demote_f64 (f64.div (f64.promote_f32 (f32.load (local.get $tp))) (local.get $sum))))
        (local.set $tp (i32.add (local.get $tp) (i32.const 4)))
        (br $pl)))
    ;; out = Σ p·v, 16 columns at a time held in registers across all positions (each output still
    ;; sums from 0 in position order, as the reference loop does), then 4 at a time, then the hd%4 tail
    (local.set $vp (i32.add (i32.add (i32.load offset=140 (i32.const 0)) (i32.mul (local.get $first) (local.get $rowb))) (local.get $headb)))
    (local.set $c (i32.const 0))
    (block $cd
      (loop $cl
        (br_if $cd (i32.gt_u (i32.add (local.get $c) (i32.const 64)) (local.get $hdv)))
        (local.set $o0 (v128.const i32x4 0 0 0 0))
        (local.set $o1 (v128.const i32x4 0 0 0 0))
        (local.set $o2 (v128.const i32x4 0 0 0 0))
        (local.set $o3 (v128.const i32x4 0 0 0 0))
        (local.set $tp (local.get $sc))
        (local.set $kp (i32.add (local.get $vp) (local.get $c)))
        (block $wd
          (loop $wl
            (br_if $wd (i32.ge_u (local.get $tp) (local.get $cend)))
            (local.set $pv (v128.load32_splat (local.get $tp)))
            (local.set $o0 (f32x4.add (local.get $o0) (f32x4.mul (local.get $pv) (v128.load offset=0 (local.get $kp)))))
            (local.set $o1 (f32x4.add (local.get $o1) (f32x4.mul (local.get $pv) (v128.load offset=16 (local.get $kp)))))
            (local.set $o2 (f32x4.add (local.get $o2) (f32x4.mul (local.get $pv) (v128.load offset=32 (local.get $kp)))))
            (local.set $o3 (f32x4.add (local.get $o3) (f32x4.mul (local.get $pv) (v128.load offset=48 (local.get $kp)))))
            (local.set $tp (i32.add (local.get $tp) (i32.const 4)))
            (local.set $kp (i32.add (local.get $kp) (local.get $rowb)))
            (br $wl)))
        (v128.store offset=0 (i32.add (local.get $op) (local.get $c)) (local.get $o0))
        (v128.store offset=16 (i32.add (local.get $op) (local.get $c)) (local.get $o1))
        (v128.store offset=32 (i32.add (local.get $op) (local.get $c)) (local.get $o2))
        (v128.store offset=48 (i32.add (local.get $op) (local.get $c)) (local.get $o3))
        (local.set $c (i32.add (local.get $c) (i32.const 64)))
        (br $cl)))
    (block $cd1
      (loop $cl1
        (br_if $cd1 (i32.ge_u (local.get $c) (local.get $hdv)))
        (local.set $o0 (v128.const i32x4 0 0 0 0))
        (local.set $tp (local.get $sc))
        (local.set $kp (i32.add (local.get $vp) (local.get $c)))
        (block $wd1
          (loop $wl1
            (br_if $wd1 (i32.ge_u (local.get $tp) (local.get $cend)))
            (local.set $o0 (f32x4.add (local.get $o0) (f32x4.mul (v128.load32_splat (local.get $tp)) (v128.load (local.get $kp)))))
            (local.set $tp (i32.add (local.get $tp) (i32.const 4)))
            (local.set $kp (i32.add (local.get $kp) (local.get $rowb)))
            (br $wl1)))
        (v128.store (i32.add (local.get $op) (local.get $c)) (local.get $o0))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (br $cl1)))
    (block $cd2
      (loop $cl2
        (br_if $cd2 (i32.ge_u (local.get $c) (local.get $hdb)))
        (local.set $s (f32.const 0))
        (local.set $tp (local.get $sc))
        (local.set $kp (i32.add (local.get $vp) (local.get $c)))
        (block $wd2
          (loop $wl2
            (br_if $wd2 (i32.ge_u (local.get $tp) (local.get $cend)))
            (local.set $s (f32.add (local.get $s) (f32.mul (f32.load (local.get $tp)) (f32.load (local.get $kp)))))
            (local.set $tp (i32.add (local.get $tp) (i32.const 4)))
            (local.set $kp (i32.add (local.get $kp) (local.get $rowb)))
            (br $wl2)))
        (f32.store (i32.add (local.get $op) (local.get $c)) (local.get $s))
        (local.set $c (i32.add (local.get $c) (i32.const 4)))
        (br $cl2))))

  ;; ---------------------------------------------------------------- SiLU gate
  ;; e^x for f32x4 (Cephes expf: x = k·ln2 + r with ln2 in two parts, degree-5 polynomial, ≈1 ulp);
  ;; x is clamped to [−87.3, 88.3] so 2^k stays a normal float.
  (func $expf4 (param $x v128) (result v128)
    (local $k v128) (local $r v128) (local $y v128)
    (local.set $x (f32x4.min (f32x4.max (local.get $x) (v128.const f32x4 -87.3 -87.3 -87.3 -87.3))
                             (v128.const f32x4 88.3 88.3 88.3 88.3)))
    (local.set $k (f32x4.nearest (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504 1.44269504 1.44269504 1.44269504))))
    (local.set $r (f32x4.sub (f32x4.sub (local.get $x)
                    (f32x4.mul (local.get $k) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375)))
                    (f32x4.mul (local.get $k) (v128.const f32x4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4))))
    (local.set $y (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4))
    (local.set $y (f32x4.add (f32x4.mul (local.get $y) (local.get $r)) (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $y (f32x4.add (f32x4.mul (local.get $y) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $y (f32x4.add (f32x4.mul (local.get $y) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $y (f32x4.add (f32x4.mul (local.get $y) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $y (f32x4.add (f32x4.mul (local.get $y) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (local.set $y (f32x4.add (f32x4.add (f32x4.mul (local.get $y) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r))
                             (v128.const f32x4 1 1 1 1)))
    (f32x4.mul (local.get $y)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $k)) (v128.const i32x4 127 127 127 127)) (i32.const 23))))

  (func $silu_gate4 (param $g v128) (param $u v128) (result v128)
    (f32x4.mul (f32x4.div (local.get $g)
                          (f32x4.add (v128.const f32x4 1 1 1 1) (call $expf4 (f32x4.neg (local.get $g)))))
               (local.get $u)))

  ;; a[i] = silu(a[i])·b[i] = a[i]/(1 + e^−a[i])·b[i] for i < n.
  (func (export "swiglu") (param $a i32) (param $b i32) (param $n i32)
    (local $o i32) (local $end i32)
    (local.set $end (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        (v128.store (i32.add (local.get $a) (local.get $o))
          (call $silu_gate4 (v128.load (i32.add (local.get $a) (local.get $o))) (v128.load (i32.add (local.get $b) (local.get $o)))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $l)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (block $tdone
      (loop $t
        (br_if $tdone (i32.ge_u (local.get $o) (local.get $end)))
        (f32.store (i32.add (local.get $a) (local.get $o))
          (f32x4.extract_lane 0 (call $silu_gate4
            (f32x4.splat (f32.load (i32.add (local.get $a) (local.get $o))))
            (f32x4.splat (f32.load (i32.add (local.get $b) (local.get $o)))))))
        (local.set $o (i32.add (local.get $o) (i32.const 4)))
        (br $t))))

  ;; Subnormal f16 weights of a packed matrix are kept out of its dense data (pack.ts: an f32 denormal
  ;; operand makes a multiply take a microcode assist) and added here, after the rows' dense sums, in
  ;; column order per row: out[r] += v·x'[c] with v = w·2^-64 and x' the prepared (·2^64) activations.
  ;; The table (addresses at 200, 204): i32 row starts (rows + 1: entries of rows [r0, r1) are
  ;; starts[r0] .. starts[r1]), then entries of 12 bytes (output byte offset r·4, x' byte offset, v),
  ;; by row then column. Entries are walked directly: most rows have none.
  (func $corr_rows (param $out i32) (param $x i32) (param $r0 i32) (param $r1 i32)
    (local $starts i32) (local $e i32) (local $end i32) (local $o i32)
    (local.set $starts (i32.load offset=200 (i32.const 0)))
    (if (i32.eqz (local.get $starts)) (then (return)))
    (local.set $e (i32.load (i32.add (local.get $starts) (i32.shl (local.get $r0) (i32.const 2)))))
    (local.set $end (i32.load (i32.add (local.get $starts) (i32.shl (local.get $r1) (i32.const 2)))))
    (local.set $e (i32.add (i32.load offset=204 (i32.const 0)) (i32.mul (local.get $e) (i32.const 12))))
    (local.set $end (i32.add (i32.load offset=204 (i32.const 0)) (i32.mul (local.get $end) (i32.const 12))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $e) (local.get $end)))
        (local.set $o (i32.add (local.get $out) (i32.load (local.get $e))))
        (f32.store (local.get $o) (f32.add (f32.load (local.get $o))
          (f32.mul (f32.load offset=8 (local.get $e)) (f32.load (i32.add (local.get $x) (i32.load offset=4 (local.get $e)))))))
        (local.set $e (i32.add (local.get $e) (i32.const 12)))
        (br $l))))

  ;; Rows [r0, r1) of a packed weight (kernel k: group kernel at k, row-major 1-row kernel at k+1):
  ;; whole groups first, then the rows%4 tail rows. One token: all of the chunk's groups in one call,
  ;; a single sequential pass. A prompt batch: each group for every token while it is in cache; the
  ;; group is widened once into this thread's scratch and the tokens run from there: f16 4 rows x 2
  ;; tokens, q8_0/q4_0 4 rows x 4-token tiles ($qtiles). Both keep the arithmetic of the 1-token
  ;; kernels, so batch and decode results are equal.
  (func $rows_packed (param $k i32) (param $out i32) (param $w i32) (param $x i32) (param $rows i32) (param $cols i32)
                     (param $n i32) (param $rb i32) (param $xs i32) (param $r0 i32) (param $r1 i32) (param $tid i32)
    (local $r i32) (local $gend i32) (local $b i32) (local $wr i32) (local $scr i32)
    (local.set $gend (i32.and (local.get $rows) (i32.const -4)))
    (if (i32.gt_u (local.get $gend) (local.get $r1)) (then (local.set $gend (local.get $r1))))
    (local.set $r (local.get $r0))
    (if (i32.and (i32.eq (local.get $n) (i32.const 1)) (i32.lt_u (local.get $r) (local.get $gend)))
      (then
        (call_indirect (type $gdot)
          (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))) (local.get $cols) (local.get $x)
          (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2)))
          (i32.shr_u (i32.sub (local.get $gend) (local.get $r)) (i32.const 2))
          (local.get $k))
        (call $corr_rows (local.get $out) (local.get $x) (local.get $r) (local.get $gend))
        (local.set $r (local.get $gend))))
    (local.set $scr (i32.add (i32.load offset=192 (i32.const 0)) (i32.mul (local.get $tid) (i32.load offset=196 (i32.const 0)))))
    ;; q8_0 / q4_0 prompt batches: two groups at a time (then a last single one) widened once into this
    ;; thread's scratch, then tiles of tokens against them ($qtiles8 / $qtiles4); the activations in
    ;; tile layout are at the address stored at 208 (quant_tiles). Same integers and f32 steps as
    ;; $g4_q8_0 / $g4_q4_0.
    (if (i32.ne (local.get $k) (i32.const 22))
      (then
        (block $qdone
          (loop $ql
            (br_if $qdone (i32.gt_u (i32.add (local.get $r) (i32.const 8)) (local.get $gend)))
            (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
            (call $qwiden32 (local.get $wr) (i32.shr_u (local.get $cols) (i32.const 5)) (local.get $scr) (i32.eq (local.get $k) (i32.const 26)))
            (call $qwiden32 (i32.add (local.get $wr) (i32.shl (local.get $rb) (i32.const 2))) (i32.shr_u (local.get $cols) (i32.const 5))
              (i32.add (local.get $scr) (i32.const 16)) (i32.eq (local.get $k) (i32.const 26)))
            (call $qtiles8 (local.get $scr) (i32.shr_u (local.get $cols) (i32.const 5)) (i32.load offset=208 (i32.const 0))
              (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))) (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))
            (local.set $r (i32.add (local.get $r) (i32.const 8)))
            (br $ql)))
        (if (i32.lt_u (local.get $r) (local.get $gend))
          (then
            (call $qwiden16 (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))) (i32.shr_u (local.get $cols) (i32.const 5))
              (local.get $scr) (i32.eq (local.get $k) (i32.const 26)))
            (call $qtiles4 (local.get $scr) (i32.shr_u (local.get $cols) (i32.const 5)) (i32.load offset=208 (i32.const 0))
              (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))) (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))
            (local.set $r (i32.add (local.get $r) (i32.const 4)))))))
    (block $gdone
      (loop $gl
        (br_if $gdone (i32.ge_u (local.get $r) (local.get $gend)))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $b (i32.const 0))
        (if (i32.eq (local.get $k) (i32.const 22))
          (then
            (call $widen4_f16 (local.get $wr) (i32.const 16) (i32.const 64)
              (i32.add (local.get $wr) (i32.shl (i32.shr_u (local.get $cols) (i32.const 3)) (i32.const 6)))
              (i32.shl (i32.and (local.get $cols) (i32.const 7)) (i32.const 1))
              (local.get $scr) (local.get $cols))
            (block $wdone
              (loop $wl
                (br_if $wdone (i32.gt_u (i32.add (local.get $b) (i32.const 2)) (local.get $n)))
                (call $dot4x2_wpairs
                  (local.get $scr) (i32.shl (local.get $cols) (i32.const 2))
                  (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
                  (local.get $cols)
                  (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
                  (local.get $xs)
                  (i32.shl (local.get $rows) (i32.const 2)))
                (local.set $b (i32.add (local.get $b) (i32.const 2)))
                (br $wl)))))
        (block $bdone
          (loop $bl
            (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))
            (call_indirect (type $gdot)
              (local.get $wr) (local.get $cols)
              (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
              (i32.const 1)
              (local.get $k))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $bl)))
        (local.set $b (i32.const 0))
        (block $cdone
          (loop $cl
            (br_if $cdone (i32.ge_u (local.get $b) (local.get $n)))
            (call $corr_rows
              (i32.add (local.get $out) (i32.shl (i32.mul (local.get $b) (local.get $rows)) (i32.const 2)))
              (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
              (local.get $r) (i32.add (local.get $r) (i32.const 4)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $cl)))
        (local.set $r (i32.add (local.get $r) (i32.const 4)))
        (br $gl)))
    (block $sdone
      (loop $sl
        (br_if $sdone (i32.ge_u (local.get $r) (local.get $r1)))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $b (i32.const 0))
        (block $bdone2
          (loop $bl2
            (br_if $bdone2 (i32.ge_u (local.get $b) (local.get $n)))
            (call_indirect (type $dot)
              (local.get $wr) (local.get $rb)
              (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
              (local.get $cols)
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
              (i32.add (local.get $k) (i32.const 1)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $bl2)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $sl))))

  ;; ---------------------------------------------------------------- job runner
  ;; Rows [r0, r1) of the current job for every token: groups of 4 rows, then single rows.
  (func $rows (param $k i32) (param $out i32) (param $w i32) (param $x i32) (param $rows i32) (param $cols i32)
              (param $n i32) (param $rb i32) (param $xs i32) (param $r0 i32) (param $r1 i32) (param $tid i32)
    (local $r i32) (local $b i32) (local $wr i32) (local $wide i32) (local $scr i32) (local $seq i32)
    (if (i32.ge_u (local.get $k) (i32.const 22))
      (then
        (call $rows_packed (local.get $k) (local.get $out) (local.get $w) (local.get $x) (local.get $rows) (local.get $cols)
          (local.get $n) (local.get $rb) (local.get $xs) (local.get $r0) (local.get $r1) (local.get $tid))
        (return)))
    ;; One token (decode) over short rows: one row at a time, front to back. The 4-row pass reads four
    ;; streams a row apart, and on rows of a few KB the hardware prefetcher never locks onto them: a
    ;; cold 768-column q8_0 weight streamed at ~5 GB/s that way against ~15 GB/s row by row (1 thread,
    ;; this 2-core EPYC). Past ~12 KB of activations per token they no longer stay in L1 while a row
    ;; streams by, and the 4-row pass (which loads them once per 4 rows) wins again. dot1 sums in the
    ;; same order as dot4, so results are unchanged. Not q4_0 (k 8): its kernel is compute-bound
    ;; (~7 GB/s row-major either way). Nor the read probe. (Packed weights, above, avoid the question:
    ;; their 4-row groups are one stream.)
    (local.set $seq (i32.and (i32.and (i32.eq (local.get $n) (i32.const 1)) (i32.le_u (local.get $xs) (i32.const 12288)))
                             (i32.lt_u (local.get $k) (i32.const 8))))
    ;; f16 with 4+ tokens: widen each row group once into this thread's scratch (base at 192, bytes
    ;; per thread at 196), then run the 4x2 kernel from it.
    (local.set $wide (i32.and (i32.eq (local.get $k) (i32.const 2)) (i32.ge_u (local.get $n) (i32.const 4))))
    (local.set $scr (i32.add (i32.load offset=192 (i32.const 0)) (i32.mul (local.get $tid) (i32.load offset=196 (i32.const 0)))))
    (local.set $r (local.get $r0))
    (block $gdone
      (loop $gl
        (br_if $gdone (i32.or (local.get $seq) (i32.gt_u (i32.add (local.get $r) (i32.const 4)) (local.get $r1))))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $b (i32.const 0))
        (if (local.get $wide)
          (then
            (call $widen4_f16 (local.get $wr) (local.get $rb) (i32.const 16)
              (i32.add (local.get $wr) (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 1))) (local.get $rb)
              (local.get $scr) (local.get $cols))
            (block $wdone
              (loop $wl
                (br_if $wdone (i32.gt_u (i32.add (local.get $b) (i32.const 2)) (local.get $n)))
                (call $dot4x2_wpairs
                  (local.get $scr) (i32.shl (local.get $cols) (i32.const 2))
                  (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
                  (local.get $cols)
                  (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
                  (local.get $xs)
                  (i32.shl (local.get $rows) (i32.const 2)))
                (local.set $b (i32.add (local.get $b) (i32.const 2)))
                (br $wl)))))
        (if (i32.lt_u (local.get $k) (i32.const 6))
          (then
            (block $pdone
              (loop $pl
                (br_if $pdone (i32.gt_u (i32.add (local.get $b) (i32.const 2)) (local.get $n)))
                (call_indirect (type $dot2)
                  (local.get $wr) (local.get $rb)
                  (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
                  (local.get $cols)
                  (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
                  (local.get $xs)
                  (i32.shl (local.get $rows) (i32.const 2))
                  (i32.add (local.get $k) (i32.const 16)))
                (local.set $b (i32.add (local.get $b) (i32.const 2)))
                (br $pl)))))
        (block $bdone
          (loop $bl
            (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))
            (call_indirect (type $dot)
              (local.get $wr) (local.get $rb)
              (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
              (local.get $cols)
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
              (local.get $k))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $bl)))
        (local.set $r (i32.add (local.get $r) (i32.const 4)))
        (br $gl)))
    (block $sdone
      (loop $sl
        (br_if $sdone (i32.ge_u (local.get $r) (local.get $r1)))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $b (i32.const 0))
        (block $bdone2
          (loop $bl2
            (br_if $bdone2 (i32.ge_u (local.get $b) (local.get $n)))
            (call_indirect (type $dot)
              (local.get $wr) (local.get $rb)
              (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs)))
              (local.get $cols)
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2)))
              (i32.add (local.get $k) (i32.const 1)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $bl2)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $sl))))

  ;; Every participating thread calls this: take chunks of rows from the shared counter until none are
  ;; left. Returns the number of chunks this thread computed.
  (func (export "run_job") (param $tid i32) (result i32)
    (local $chunk i32) (local $cr i32) (local $rows i32) (local $r0 i32) (local $r1 i32) (local $count i32) (local $i i32)
    (local.set $rows (i32.load offset=20 (global.get $CTL)))
    (local.set $cr (i32.load offset=44 (global.get $CTL)))
    (block $done
      (loop $l
        (local.set $chunk (i32.atomic.rmw.add offset=40 (global.get $CTL) (i32.const 1)))
        (local.set $r0 (i32.mul (local.get $chunk) (local.get $cr)))
        (br_if $done (i32.ge_u (local.get $r0) (local.get $rows)))
        ;; overflow guard: chunk * cr wraps only for absurd counters
        (br_if $done (i32.lt_u (local.get $r0) (local.get $chunk)))
        (local.set $r1 (i32.add (local.get $r0) (local.get $cr)))
        (if (i32.gt_u (local.get $r1) (local.get $rows)) (then (local.set $r1 (local.get $rows))))
        (if (i32.eq (i32.load offset=4 (global.get $CTL)) (i32.const 12))
          (then
            (local.set $i (local.get $r0))
            (block $ad
              (loop $al
                (br_if $ad (i32.ge_u (local.get $i) (local.get $r1)))
                (call $attn_item (local.get $i))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $al)))
            (local.set $count (i32.add (local.get $count) (i32.const 1)))
            (br $l)))
        (call $rows
          (i32.load offset=4 (global.get $CTL))
          (i32.load offset=8 (global.get $CTL))
          (i32.load offset=12 (global.get $CTL))
          (i32.load offset=16 (global.get $CTL))
          (local.get $rows)
          (i32.load offset=24 (global.get $CTL))
          (i32.load offset=28 (global.get $CTL))
          (i32.load offset=32 (global.get $CTL))
          (i32.load offset=36 (global.get $CTL))
          (local.get $r0) (local.get $r1) (local.get $tid))
        (local.set $count (i32.add (local.get $count) (i32.const 1)))
        (br $l)))
    (local.get $count))
)
