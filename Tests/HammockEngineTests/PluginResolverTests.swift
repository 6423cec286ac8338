import Foundation
import HammockPluginHost
import Testing

/// Where hammock finds a kind's plugin: beside itself, then in ../libexec/hammock (an installed layout), then
/// on HAMMOCK_PLUGIN_PATH and PATH. Real files and permissions, no hammock run.
@Suite struct PluginResolverTests {
    private func makeExecutable(_ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
    }

    @Test func besideTheExecutableThenLibexecThenThePaths() throws {
        let prefix = FileManager.default.temporaryDirectory.path + "/hammock-resolver-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        try makeExecutable(prefix + "/libexec/hammock/hammock-plugin-installed")
        try makeExecutable(prefix + "/libexec/hammock/hammock-plugin-both")
        try makeExecutable(prefix + "/bin/hammock-plugin-both")
        try makeExecutable(prefix + "/elsewhere/hammock-plugin-onpath")
        // Not executable: skipped, as a shell skips it.
        try Data().write(to: URL(fileURLWithPath: prefix + "/bin/hammock-plugin-plain"))

        let resolver = PluginResolver(executableDirectory: prefix + "/bin", environment: ["PATH": prefix + "/elsewhere"])
        #expect(resolver.command(for: "installed") == [prefix + "/libexec/hammock/hammock-plugin-installed"])
        #expect(resolver.command(for: "both") == [prefix + "/bin/hammock-plugin-both"])
        #expect(resolver.command(for: "onpath") == [prefix + "/elsewhere/hammock-plugin-onpath"])
        #expect(resolver.command(for: "plain") == nil)
        #expect(resolver.searchDescription(for: "x").contains("\(prefix)/bin and \(prefix)/libexec/hammock"))
    }
}
