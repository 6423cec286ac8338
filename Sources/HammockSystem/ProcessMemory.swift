import CHammockSystem

/// How hammock's long-running processes use glibc's allocator.
public enum ProcessMemory {
    /// Blocks of at least this many bytes are mapped each on their own, and given back to the system when
    /// freed (glibc's own starting threshold).
    public static let largeBlock: Int32 = 128 << 10

    /// Keeps `largeBlock` as the threshold for good. glibc raises it by itself each time a mapped block is
    /// freed, after which blocks of that size come from the heap, where freeing them seldom gives memory back:
    /// measured on `hammock serve`, clients that stalled on a 400 KB line (their bytes held, then dropped)
    /// left the engine 8 to 11 MiB larger for good after 10,000 connections, against flat with the threshold
    /// fixed (`ServeTests` "10,000 connect/disconnect cycles…", which failed on it). Called first thing by
    /// the commands that run an engine.
    public static func returnLargeBlocks() {
        _ = hammock_fix_mmap_threshold(largeBlock)
    }
}
