/**
 * Top-k exactly as PyTorch's CPU `torch.topk(largest=True)` picks it, ties included: which of several
 * equal scores win decides which experts run, and bf16 router logits tie often enough to matter.
 *
 * PyTorch (aten/src/ATen/native/TopKImpl.h) fills a queue of (value, index) pairs and, with the
 * comparator "x before y when x is NaN and y is not, or x > y" (no index tie-break), calls
 * `std::partial_sort(k)` when 64·k ≤ n, else `std::nth_element(k−1)` followed, when sorted, by
 * `std::sort` of the first k−1. The winners among equal values are therefore whatever the C++ standard
 * library's algorithms leave in front. This file re-implements GNU libstdc++'s versions of them (what
 * Linux builds of PyTorch use; macOS builds use libc++, which can choose differently among ties):
 * introselect with median-of-three Hoare partitioning, introsort with a final insertion sort below 16
 * elements, and heap-select for partial_sort.
 */

/** PyTorch's ordering: NaN first, then larger values. */
function before(a: number, b: number): boolean {
  return (Number.isNaN(a) && !Number.isNaN(b)) || a > b;
}

/** The queue: values and their original indices, permuted together. */
class Queue {
  constructor(
    readonly v: Float64Array,
    readonly i: Int32Array,
  ) {}
  less(a: number, b: number): boolean {
    return before(this.v[a], this.v[b]);
  }
  swap(a: number, b: number): void {
    const v = this.v[a];
    this.v[a] = this.v[b];
    this.v[b] = v;
    const i = this.i[a];
    this.i[a] = this.i[b];
    this.i[b] = i;
  }
  /** Slot a takes slot b's pair. */
  move(a: number, b: number): void {
    this.v[a] = this.v[b];
    this.i[a] = this.i[b];
  }
}

const log2Floor = (n: number) => 31 - Math.clz32(n);

function moveMedianToFirst(q: Queue, result: number, a: number, b: number, c: number): void {
  if (q.less(a, b)) {
    if (q.less(b, c)) q.swap(result, b);
    else if (q.less(a, c)) q.swap(result, c);
    else q.swap(result, a);
  } else if (q.less(a, c)) q.swap(result, a);
  else if (q.less(b, c)) q.swap(result, c);
  else q.swap(result, b);
}

/** Hoare partition of [first, last) around the pivot at `pivot` (which lies outside the range). */
function unguardedPartition(q: Queue, first: number, last: number, pivot: number): number {
  for (;;) {
    while (q.less(first, pivot)) first++;
    last--;
    while (q.less(pivot, last)) last--;
    if (!(first < last)) return first;
    q.swap(first, last);
    first++;
  }
}

function partitionPivot(q: Queue, first: number, last: number): number {
  const mid = first + ((last - first) >> 1);
  moveMedianToFirst(q, first, first + 1, mid, last - 1);
  return unguardedPartition(q, first + 1, last, first);
}

/** Shifts the pair at `last` left while it sorts before its neighbour (no bound check: something smaller lies left). */
function unguardedLinearInsert(q: Queue, last: number): void {
  const v = q.v[last];
  const i = q.i[last];
  let next = last - 1;
  while (before(v, q.v[next])) {
    q.move(last, next);
    last = next;
    next--;
  }
  q.v[last] = v;
  q.i[last] = i;
}

function insertionSort(q: Queue, first: number, last: number): void {
  if (first === last) return;
  for (let k = first + 1; k < last; k++) {
    if (q.less(k, first)) {
      const v = q.v[k];
      const i = q.i[k];
      for (let j = k; j > first; j--) q.move(j, j - 1);
      q.v[first] = v;
      q.i[first] = i;
    } else unguardedLinearInsert(q, k);
  }
}

// Binary heap over [first, first + len) with "less" = `before`: the root is the element sorting last.
function pushHeap(q: Queue, first: number, hole: number, top: number, v: number, i: number): void {
  let parent = (hole - 1) >> 1;
  while (hole > top && before(q.v[first + parent], v)) {
    q.move(first + hole, first + parent);
    hole = parent;
    parent = (hole - 1) >> 1;
  }
  q.v[first + hole] = v;
  q.i[first + hole] = i;
}

function adjustHeap(q: Queue, first: number, hole: number, len: number, v: number, i: number): void {
  const top = hole;
  let child = hole;
  while (child < (len - 1) >> 1) {
    child = 2 * (child + 1);
    if (q.less(first + child, first + child - 1)) child--;
    q.move(first + hole, first + child);
    hole = child;
  }
  if ((len & 1) === 0 && child === (len - 2) >> 1) {
    child = 2 * (child + 1);
    q.move(first + hole, first + child - 1);
    hole = child - 1;
  }
  pushHeap(q, first, hole, top, v, i);
}

function makeHeap(q: Queue, first: number, last: number): void {
  const len = last - first;
  if (len < 2) return;
  for (let parent = (len - 2) >> 1; ; parent--) {
    adjustHeap(q, first, parent, len, q.v[first + parent], q.i[first + parent]);
    if (parent === 0) return;
  }
}

/** Moves the root to `result` and the pair at `result` into the heap [first, last). */
function popHeap(q: Queue, first: number, last: number, result: number): void {
  const v = q.v[result];
  const i = q.i[result];
  q.move(result, first);
  adjustHeap(q, first, 0, last - first, v, i);
}

function heapSelect(q: Queue, first: number, middle: number, last: number): void {
  makeHeap(q, first, middle);
  for (let k = middle; k < last; k++) if (q.less(k, first)) popHeap(q, first, middle, k);
}

function sortHeap(q: Queue, first: number, last: number): void {
  while (last - first > 1) {
    last--;
    popHeap(q, first, last, last);
  }
}

function partialSort(q: Queue, first: number, middle: number, last: number): void {
  heapSelect(q, first, middle, last);
  sortHeap(q, first, middle);
}

function nthElement(q: Queue, first: number, nth: number, last: number): void {
  if (first === last || nth === last) return;
  let depth = log2Floor(last - first) * 2;
  while (last - first > 3) {
    if (depth === 0) {
      heapSelect(q, first, nth + 1, last);
      q.swap(first, nth);
      return;
    }
    depth--;
    const cut = partitionPivot(q, first, last);
    if (cut <= nth) first = cut;
    else last = cut;
  }
  insertionSort(q, first, last);
}

const THRESHOLD = 16;

function introsortLoop(q: Queue, first: number, last: number, depth: number): void {
  while (last - first > THRESHOLD) {
    if (depth === 0) {
      partialSort(q, first, last, last);
      return;
    }
    depth--;
    const cut = partitionPivot(q, first, last);
    introsortLoop(q, cut, last, depth);
    last = cut;
  }
}

function sort(q: Queue, first: number, last: number): void {
  if (first === last) return;
  introsortLoop(q, first, last, log2Floor(last - first) * 2);
  if (last - first > THRESHOLD) {
    insertionSort(q, first, first + THRESHOLD);
    for (let k = first + THRESHOLD; k < last; k++) unguardedLinearInsert(q, k);
  } else insertionSort(q, first, last);
}

/** Reusable scratch for `torchTopK` over up to `capacity` values. */
export class TopK {
  readonly #q: Queue;
  constructor(readonly capacity: number) {
    this.#q = new Queue(new Float64Array(capacity), new Int32Array(capacity));
  }

  /**
   * Indices of the `k` largest of values[offset .. offset+n) into `out[0..k)`, in the order
   * `torch.topk(…, k, sorted)` returns them (with sorted=false the order is the selection's; the set is
   * the same either way).
   */
  select(values: ArrayLike<number>, offset: number, n: number, k: number, out: Int32Array, sorted = true): Int32Array {
    if (n > this.capacity) throw new RangeError(`topk: ${n} values exceed this selector's capacity ${this.capacity}`);
    if (!Number.isInteger(k) || k < 1 || k > n) throw new RangeError(`topk: k=${k} is outside 1..${n}`);
    const q = this.#q;
    for (let j = 0; j < n; j++) {
      q.v[j] = values[offset + j];
      q.i[j] = j;
    }
    if (k * 64 <= n) partialSort(q, 0, k, n);
    else {
      nthElement(q, 0, k - 1, n);
      if (sorted) sort(q, 0, k - 1);
    }
    for (let j = 0; j < k; j++) out[j] = q.i[j];
    return out;
  }
}
