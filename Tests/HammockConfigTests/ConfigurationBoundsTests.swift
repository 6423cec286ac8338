import Foundation
import HammockConfig
import HammockCore
import HammockTestSupport
import Testing

/// Issue 25's bounds on a configuration as a whole, each refused at its file, line and column with a clear
/// message; what is allowed is read in time linear in its size. And the rules that keep a secret or an id
/// from doing harm in the output: a secret too short to redact, a view id that is not an identifier, and
/// the 64 KiB limit of a `${file:}` secret.
@Suite struct ConfigurationBoundsTests {
    /// A fresh folder under the temporary directory, removed by the caller.
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hammock-bounds-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func diagnostics(_ result: Result<LoadedConfiguration, ConfigurationError>) -> [String] {
        switch result {
        case .success: []
        case .failure(let error): error.diagnostics.map { $0.formatted(file: error.file) }
        }
    }

    // MARK: The whole configuration's size

    @Test func includedFilesTogetherAreBoundedBeforeTheyAreRead() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Two files of 2.5 MiB each, each under the 4 MiB limit of one file; together over it.
        let padding = String(repeating: "# padding to make the file large\n", count: (5 << 19) / 33)
        for name in ["one", "two"] {
            try (padding + "sources:\n  \(name): { kind: fake, content: 1 }\n").write(
                toFile: "\(folder)/\(name).yaml", atomically: true, encoding: .utf8)
        }
        let main = folder + "/main.yaml"
        try "include:\n  - one.yaml\n  - two.yaml\n".write(toFile: main, atomically: true, encoding: .utf8)
        let shown = Self.diagnostics(loader().load(file: main))
        #expect(shown.count == 1, "\(shown)")
        #expect(
            shown.first?.hasPrefix("\(main):3:5: include \"two.yaml\": \(folder)/two.yaml is ") == true
                && shown.first?.contains("a configuration may be at most 4 MiB, all its files together") == true,
            "\(shown)")

        // One of them alone is fine.
        try "include: one.yaml\n".write(toFile: main, atomically: true, encoding: .utf8)
        #expect(Self.diagnostics(loader().load(file: main)).isEmpty)
    }

    // MARK: Bases

    /// `count` bases in one chain, b1 over b2 over … over bN (which has the kind), and a source on b1.
    static func baseChain(_ count: Int) -> String {
        var text = "bases:\n"
        for index in 1..<count { text += "  b\(index): { base: b\(index + 1) }\n" }
        text += "  b\(count): { kind: fake, content: 1 }\n"
        return text + "sources:\n  s: { base: b1 }\n"
    }

    @Test func basesStackAtMost32Deep() {
        #expect(problems(Self.baseChain(32)).isEmpty)
        let shown = problems(Self.baseChain(33))
        // The 32nd base's `base: b33`, on line 33 (bases: is line 1), column 16.
        #expect(
            shown == [
                "33:16: source \"s\": its bases stack more than 32 deep (b1 → b2 → b3 → … → b32 → b33); a chain of bases may be at most 32 long"
            ], "\(shown)")
    }

    /// The CPU time this thread spends reading a configuration, the best of three. CPU time, not the
    /// wall clock's: the parse is synchronous, so the thread is the one it runs on, and a whole-suite run
    /// that keeps other threads on both cores does not count (the wall clock's ratio was once 3.25 so).
    static func bestTime(_ text: String) -> Duration {
        (0..<3).map { _ in
            let start = threadCPUTime()
            _ = loader().parse(text, file: "test.yaml")
            return threadCPUTime() - start
        }.min()!
    }

    /// Was quadratic in the chain's length (100,000 bases: 156 s). Now a chain is followed at most 32 deep
    /// and the rest of the bases are only read: 8x the bases take about 4 times as long as 2x, far from 16.
    @Test func aLongChainOfBasesIsReadInLinearTime() {
        let unit = 1_500
        _ = Self.bestTime(Self.baseChain(unit))  // warm up
        let two = Self.bestTime(Self.baseChain(2 * unit))
        let eight = Self.bestTime(Self.baseChain(8 * unit))
        let ratio = eight / two
        #expect(ratio < 8, "8x the bases took \(eight), 2x took \(two): \(ratio) times as long")
    }

    // MARK: Views

    @Test func aViewMergesAtMost10000Sources() {
        func config(_ count: Int) -> String {
            "sources:\n  a: { kind: fake, content: 1 }\nviews:\n  v:\n    sources: [" + (0..<count).map { _ in "a" }.joined(separator: ", ") + "]\n"
        }
        let shown = problems(config(10_001))
        #expect(shown == ["5:14: view \"v\" lists 10001 sources; a view may merge at most 10000, so split it into several views"], "\(shown)")
        // Within the bound, every listing of `a` past the first is a duplicate, found in linear time.
        let duplicates = problems(config(10_000))
        #expect(duplicates.count == 9_999 && duplicates.allSatisfy { $0.contains("lists source \"a\" twice") })
    }

    @Test func viewIdsFollowTheRuleOfSourceIds() {
        let text = """
            sources:
              a: { kind: fake, content: 1 }
            views:
              "nul\\0id": { sources: [a] }
              "esc\\eid": { sources: [a] }
              "two\\nlines": { sources: [a] }
              "": { sources: [a] }
              ok_view-1: { sources: [a] }
            """
        #expect(
            problems(text) == [
                "4:3: view id \"nul\u{0}id\" may hold only letters, digits, \"_\" and \"-\"",
                "5:3: view id \"esc\u{1B}id\" may hold only letters, digits, \"_\" and \"-\"",
                "6:3: view id \"two\nlines\" may hold only letters, digits, \"_\" and \"-\"",
                "7:3: view id \"\" may hold only letters, digits, \"_\" and \"-\"",
            ], "\(problems(text))")
        // Shown as `check` shows it: escaped, so the terminal sees no control character.
        guard case .failure(let error) = loader().parse(text, file: "test.yaml") else { return }
        #expect(!error.description.unicodeScalars.contains { $0 == "\u{0}" || $0 == "\u{1B}" }, "\(error.description)")
        #expect(error.description.split(separator: "\n").count == 4, "one line for each: \(error.description)")
    }

    // MARK: Secrets

    @Test func aSecretShorterThan4CharactersIsRefusedWhereItIsWritten() {
        let environment = ["ONE": "e", "THREE": "abc", "FOUR": "abcd"]
        let text = """
            sources:
              a: { kind: shell, command: [echo, hi], env: { KEY: "${secret:ONE}" } }
              b: { kind: rest, url: "https://example.org", headers: { X-Key: "${THREE}" } }
              c: { kind: rest, url: "https://example.org", headers: { X-Key: "${FOUR}" } }
            """
        let message = "a secret here is shorter than 4 characters, too short to keep out of the output (hiding it would blank out its letters everywhere); use a longer secret, or write the value itself if it is not secret"
        #expect(problems(text, environment: environment) == ["2:54: \(message)", "3:66: \(message)"], "\(problems(text, environment: environment))")
        guard case .failure(let error) = loader(environment).parse(text, file: "test.yaml") else { return }
        // Not kept as secrets: redacting them would eat the message itself.
        #expect(error.secrets == ["abcd"])
        #expect(shownByCheck(error).contains("shorter than 4 characters"))
        // A plain `${NAME}` outside a credential is configuration, whatever its length.
        #expect(problems("sources:\n  a: { kind: fake, content: \"${ONE}\" }\n", environment: environment).isEmpty)
    }

    @Test func aFileSecretOf64KiBIsReadAndOneByteMoreIsRefused() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let limit = 64 << 10
        try Data(repeating: UInt8(ascii: "k"), count: limit).write(to: URL(fileURLWithPath: folder + "/at-limit"))
        try Data(repeating: UInt8(ascii: "k"), count: limit + 1).write(to: URL(fileURLWithPath: folder + "/over-limit"))
        func text(_ name: String) -> String {
            "sources:\n  a: { kind: shell, command: [echo, hi], env: { KEY: \"${file:\(folder)/\(name)}\" } }\n"
        }
        let loaded = try load(text("at-limit"))
        #expect(loaded.configuration.source("a")?.options["env"]?["KEY"]?.stringValue?.utf8.count == limit)
        #expect(loaded.configuration.secrets.contains(String(repeating: "k", count: limit)))
        #expect(
            problems(text("over-limit")) == [
                "2:54: ${file:\(folder)/over-limit}: \(folder)/over-limit is \(limit + 1) bytes, more than a secret's limit of \(limit)"
            ], "\(problems(text("over-limit")))")
    }
}
