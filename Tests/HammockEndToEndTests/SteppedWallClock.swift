import Foundation
import Testing

/// A wall clock a test steps under a running hammock: libfaketime preloaded, its offset read from a file at
/// every call (so a write moves the clock at once), the monotonic clock left alone.
struct SteppedWallClock {
    static let libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    let offsetFile: String
    /// For `HammockProcess.withRunning(environment:launcher:)`.
    let environment: [String: String]
    /// libfaketime's first preloaded process sets FAKETIME_SHARED with setenv, which moves `environ`, and
    /// Swift's runtime, which finds argv next to it, then sees no arguments: hammock starts from a preloaded
    /// shell, so that it inherits the variable instead of setting it.
    let launcher = ["/bin/sh", "-c", #"exec "$@""#, "sh"]

    /// A clock at the true time, its offset file in `directory`.
    init(in directory: String) throws {
        try #require(
            FileManager.default.fileExists(atPath: Self.libfaketime),
            "libfaketime is missing: apt-get install faketime (.ci/run installs it)")
        offsetFile = directory + "/faketime"
        environment = [
            "LD_PRELOAD": Self.libfaketime, "FAKETIME_TIMESTAMP_FILE": offsetFile, "FAKETIME_NO_CACHE": "1",
            "DONT_FAKE_MONOTONIC": "1",
        ]
        try set("+0")
    }

    /// Moves the clock to the true time plus `offset` (libfaketime's form: `+30s`, `-1h`).
    func set(_ offset: String) throws {
        try Data("\(offset)\n".utf8).write(to: URL(fileURLWithPath: offsetFile))
    }
}
