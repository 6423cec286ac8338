import Foundation
import Glibc
import HammockCore
import Testing

@testable import HammockShellPlugin

/// How the end of a run is put into words, in-process.
@Suite struct CommandResultTests {
    private func result(_ ending: CommandResult.Ending, stderr: String = "", endReason: EndReason? = nil) -> CommandResult {
        CommandResult(ending: ending, stderrTail: stderr, endReason: endReason)
    }

    @Test func aCleanExitIsNoFailure() {
        #expect(result(.exited(0)).failure() == nil)
        #expect(result(.exited(0), stderr: "a warning").failure() == nil)
    }

    @Test func aNonZeroExitCarriesItsStatusAndTheEndOfStderr() {
        #expect(result(.exited(3)).failure() == SourceError(message: "exited with status 3", exitStatus: 3))
        #expect(result(.exited(3), stderr: "disk is full").failure() == SourceError(message: "exited with status 3: disk is full", exitStatus: 3))
    }

    @Test func aSignalIsNamed() {
        #expect(result(.signaled(SIGKILL)).failure() == SourceError(message: "killed by SIGKILL", code: .signaled))
        #expect(result(.signaled(SIGSEGV), stderr: "core").failure() == SourceError(message: "killed by SIGSEGV: core", code: .signaled))
        #expect(signalName(SIGTERM) == "SIGTERM")
        #expect(signalName(64) == "signal 64")
    }

    @Test func aLaunchFailureIsPassedOnAsItIs() {
        let error = SourceError(message: "command not found: nope", code: .commandNotFound)
        #expect(result(.launchFailed(error)).failure() == error)
    }

    @Test func theReasonThePluginEndedTheCommandComesFirst() {
        // Ended by the plugin, the command dies of its SIGTERM: that is not what the user needs to hear.
        let killed = CommandResult.Ending.signaled(SIGTERM)
        #expect(result(killed, endReason: .timeout(.seconds(1))).failure() == SourceError(message: "timed out after 1s", code: .timeout))
        #expect(
            result(killed, endReason: .timeout(.milliseconds(1500))).failure()
                == SourceError(message: "timed out after 1s500ms", code: .timeout))
        #expect(result(killed, endReason: .cancelled).failure() == SourceError(message: "cancelled", code: .cancelled))
        #expect(result(killed, endReason: .stopped).failure() == SourceError(message: "the source was stopped", code: .stopped))
        // Too much output is for the caller to word: it knows the limit.
        #expect(result(.exited(0), endReason: .outputTooLarge).failure() == nil)
        #expect(result(killed, endReason: .lineTooLong).failure() == SourceError(message: "killed by SIGTERM", code: .signaled))
    }
}

/// Finding a program on `PATH` once, as a shell would, in-process over real files.
@Suite struct FindOnPathTests {
    private func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("shell-path-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func file(_ url: URL, mode: Int) throws {
        try Data("#!/bin/sh\n".utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
    }

    @Test func theFirstExecutableFileOnThePathWins() throws {
        let (first, second) = (try folder(), try folder())
        defer { for url in [first, second] { try? FileManager.default.removeItem(at: url) } }
        try file(second.appendingPathComponent("tool"), mode: 0o755)
        #expect(findOnPath("tool", path: "\(first.path):\(second.path)") == second.path + "/tool")
        try file(first.appendingPathComponent("tool"), mode: 0o755)
        #expect(findOnPath("tool", path: "\(first.path):\(second.path)") == first.path + "/tool")
    }

    @Test func aFileThatIsNotExecutableOrADirectoryIsPassedOver() throws {
        let (first, second) = (try folder(), try folder())
        defer { for url in [first, second] { try? FileManager.default.removeItem(at: url) } }
        try file(first.appendingPathComponent("tool"), mode: 0o644)
        try FileManager.default.createDirectory(at: first.appendingPathComponent("dir"), withIntermediateDirectories: false)
        try file(second.appendingPathComponent("tool"), mode: 0o755)
        #expect(findOnPath("tool", path: "\(first.path):\(second.path)") == second.path + "/tool")
        #expect(findOnPath("dir", path: first.path) == nil)
        #expect(findOnPath("absent", path: "\(first.path):\(second.path)") == nil)
    }

    @Test func withoutAPathTheUsualDirectoriesAreSearched() {
        #expect(findOnPath("sh", path: nil).map { ["/usr/local/bin/sh", "/usr/bin/sh", "/bin/sh"].contains($0) } == true)
    }
}
