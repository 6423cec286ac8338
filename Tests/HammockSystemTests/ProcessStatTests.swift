import Foundation
import Glibc
import HammockSystem
import Testing

/// `ProcessStat` against the real /proc (moved here from the engine's ProcessControlTests with the parser).
@Suite(.timeLimit(.minutes(1)))
struct ProcessStatTests {
    @Test func statFieldsComeAfterTheLastParenthesisOfTheName() throws {
        let text = "4242 (a (weird) name) S 17 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
        let stat = try #require(ProcessStat(Array(text.utf8)))
        #expect(stat == ProcessStat(Array("1 (x) S 17 4242 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0".utf8)))
        #expect(stat.state == "S" && stat.parent == 17 && stat.group == 4242 && stat.startTime == 987654)
        #expect(ProcessStat(Array("4242 (cut short) S 17".utf8)) == nil)
    }

    @Test func ourOwnStatNamesOurParentAndGroup() throws {
        let stat = try #require(ProcessStat(pid: getpid()))
        #expect(stat.parent == getppid() && stat.group == getpgrp() && stat.state != "Z")
    }

    @Test("a process whose name holds spaces and parentheses that look like fields: read from the last ')'")
    func aNameThatLooksLikeFieldsIsSkipped() async throws {
        // The kernel keeps 15 bytes of the executable's name: all of this one, which parsed from its first
        // `)` would read as state S, parent 1, group 1.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stat-\(getpid())-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = directory.appendingPathComponent("x) S 1 1 (y").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: program)

        var pid: pid_t = 0
        let arguments = [program, "30"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        #expect(posix_spawn(&pid, program, nil, nil, &argv, environ) == 0)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        // The child carries this process's thread name until its exec is done.
        let deadline = ContinuousClock.now + .seconds(10)
        var name = ""
        // Read once more after the deadline: a sleep may end long after it when the pool is busy.
        while true {
            name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
            guard name != "x) S 1 1 (y\n" && ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(name == "x) S 1 1 (y\n")
        let stat = try #require(ProcessStat(pid: pid))
        #expect(stat.parent == getpid() && stat.group == getpgrp() && stat.isLive)
        #expect(stat.startTime >= ProcessStat(pid: getpid())!.startTime)
        #expect(ProcessStat.allPIDs()?.contains(pid) == true)
        #expect(ProcessStat.allPIDs()?.contains(getpid()) == true)
        // This kernel lists each thread's children: the orphan sweep reads those, not every process.
        let children = try #require(ProcessStat.ownChildren())
        #expect(children.contains(pid))
        #expect(!children.contains(getpid()))
    }

    @Test("a process that is gone has no stat")
    func goneProcessHasNone() {
        #expect(ProcessStat(pid: 0) == nil)
        #expect(ProcessStat(pid: -1) == nil)
    }
}
