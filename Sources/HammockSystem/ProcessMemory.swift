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
    /// fixed (`ServeTests` "10,000 connect/disconnect cycles…", which failed on it). Also caps the arenas
    /// (`mostArenas`). Called first thing by the commands that run an engine, and by every plugin of the kit.
    public static func returnLargeBlocks() {
        _ = hammock_fix_mmap_threshold(largeBlock)
        _ = hammock_limit_malloc_arenas(mostArenas)
    }

    /// At most this many malloc arenas. glibc gives each thread that allocates while another holds the main
    /// arena one of its own, up to 8 per core, each keeping what its thread freed: with the Swift pool, the
    /// readers and the writers, the engine held about 2 MiB more at 1,000 sources (`benchmarks/run memory`:
    /// +16.8 KiB a source with glibc's cap, +14.9 with 2, measured 2026-12-06). Two keep the pool's two
    /// threads from waiting on each other's allocations.
    public static let mostArenas: Int32 = 2
}
