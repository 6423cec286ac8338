import Foundation
import HammockConfig
import HammockCore
import HammockJSON
import Testing

/// `bases:` (settings written once) and `include:` (a configuration over several files): the merge rules,
/// relative urls and paths, and diagnostics at the right file, line and column.
@Suite struct BaseTests {
    @Test func defaultsThenBaseThenSourceMappingsMergeKeyByKey() throws {
        let loaded = try load(
            """
            defaults: { timeout: 7s, refresh: 1m }
            bases:
              api:
                kind: rest
                url: https://example.org/api/v1/
                refresh: 2m
                headers: { Accept: application/json, X-Team: core }
                query: { page: 1 }
            sources:
              users:
                base: api
                url: /users
                headers: { X-Team: web }
                paginate: { style: link }
            """)
        let users = try #require(loaded.configuration.source("users"))
        #expect(users.kind == "rest")
        #expect(users.timeout == .seconds(7))  // defaults
        #expect(users.refresh == .seconds(120))  // the base over defaults
        #expect(users.options["url"] == .string("https://example.org/api/v1/users"))
        #expect(users.options["headers"] == .object(["Accept": "application/json", "X-Team": "web"]))
        #expect(users.options["query"] == .object(["page": 1]))
        #expect(users.options["paginate"] == .object(["style": "link"]))
        #expect(users.options["base"] == nil)
    }

    @Test func relativeURLsJoinWithOneSlashAndAbsoluteOnesReplace() {
        func joined(_ base: String, _ relative: String) -> JSONValue {
            OptionLayersProbe.url(base: base, relative: relative)
        }
        #expect(joined("https://h/api", "/x") == "https://h/api/x")
        #expect(joined("https://h/api/", "x") == "https://h/api/x")
        #expect(joined("https://h/api/", "/x") == "https://h/api/x")
        #expect(joined("https://h", "x?y=1") == "https://h/x?y=1")
        #expect(joined("https://h/a", "?y=1") == "https://h/a?y=1")
        #expect(joined("https://h/a", "http://other/b") == "http://other/b")
        #expect(joined("https://h/a", "{{ other.url }}") == "{{ other.url }}")
    }

    @Test func aRelativePathJoinsADirectoryBase() throws {
        let loaded = try load(
            """
            bases:
              notes: { kind: file, path: /srv/notes/ }
              one: { kind: file, path: /srv/one.json }
            sources:
              todo: { base: notes, path: todo.md }
              absolute: { base: notes, path: /etc/motd }
              replaced: { base: one, path: two.json }
            """)
        #expect(loaded.configuration.source("todo")?.options["path"] == "/srv/notes/todo.md")
        #expect(loaded.configuration.source("absolute")?.options["path"] == "/etc/motd")
        #expect(loaded.configuration.source("replaced")?.options["path"] == "two.json")
    }

    @Test func aBaseMayNameABaseAndListsAndScalarsReplace() throws {
        let loaded = try load(
            """
            bases:
              shell: { kind: shell, env: { A: "1", B: "2" }, args: [x] }
              loud: { base: shell, env: { B: "3" }, args: [y, z] }
            sources:
              s: { base: loud, command: echo, env: { C: "4" } }
            """)
        let source = try #require(loaded.configuration.source("s"))
        #expect(source.kind == "shell")
        #expect(source.options["env"] == .object(["A": "1", "B": "3", "C": "4"]))
        #expect(source.options["args"] == .array(["y", "z"]))
    }

    @Test func unknownBaseHasADidYouMeanAndACycleIsReported() {
        #expect(
            problems(
                """
                bases:
                  github: { kind: rest, url: "https://api.github.com" }
                sources:
                  a: { base: githb, url: /x }
                """) == [#"4:14: source "a": unknown base "githb" (did you mean "github"?); bases: github"#])
        #expect(
            problems(
                """
                bases:
                  x: { base: y }
                  y: { base: x }
                sources:
                  a: { base: x, kind: fake }
                """) == [#"3:14: base cycle: x → y → x; a base may not be its own base, however indirectly"#])
    }

    @Test func anUnusedBaseIsFineAndKindMayComeFromTheSource() throws {
        let loaded = try load(
            """
            bases:
              unused: { kind: nothing-like-it }
              timing: { refresh: 9s }
            sources:
              a: { base: timing, kind: fake }
            """)
        #expect(loaded.configuration.source("a")?.refresh == .seconds(9))
    }

    @Test func anOptionFromABaseIsPlacedAtTheBasesLine() throws {
        let loaded = try load(
            """
            bases:
              api:
                kind: rest
                headers:
                  Accept: json
            sources:
              a:
                base: api
                url: https://h/x
            """)
        let diagnostic = loaded.diagnostic(
            source: "a", problem: OptionProblem(pointer: JSONPointer(tokens: ["headers", "Accept"]), message: "no"))
        #expect(diagnostic.formatted(file: "other") == #"test.yaml:5:7: source "a": no"#)
        let own = loaded.diagnostic(source: "a", problem: OptionProblem(pointer: JSONPointer(tokens: ["url"]), message: "no"))
        #expect(own.formatted(file: "other") == #"test.yaml:9:5: source "a": no"#)
    }

    @Test func aBaseHeaderVariableIsASecret() throws {
        let loaded = try load(
            """
            bases:
              api: { kind: rest, url: "https://h", headers: { Authorization: "Bearer ${TOKEN}" } }
            sources:
              a: { base: api, url: /x }
            """, environment: ["TOKEN": "s3cr3t-value"])
        #expect(loaded.configuration.secrets.contains("s3cr3t-value"))
    }
}

/// Reaches the url rule through the loader, as a source over a base.
enum OptionLayersProbe {
    static func url(base: String, relative: String) -> JSONValue {
        let text = """
            bases:
              b: { kind: rest, url: "\(base)" }
            sources:
              s: { base: b, url: "\(relative)" }
              other: { kind: fake }
            """
        return (try? load(text))?.configuration.source("s")?.options["url"] ?? "(did not load)"
    }
}

/// Files in a fresh temporary directory, for `include:`.
struct ConfigurationFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("hammock-include-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ text: String) throws {
        let file = path + "/" + name
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
    }

    /// Writes many files (name, text) on a thread of its own: thousands of file system calls (Foundation syncs
    /// each file it writes to the disk) take seconds on a busy machine, which must not be spent holding one of
    /// the cooperative pool's threads.
    func write(_ files: [(name: String, text: String)]) async throws {
        let written: Result<Void, any Error> = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: Result { for file in files { try write(file.name, file.text) } }) }.start()
        }
        try written.get()
    }

    func load(_ name: String = "main.yaml") -> Result<LoadedConfiguration, ConfigurationError> {
        loader().load(file: path + "/" + name)
    }

    /// Every diagnostic as `file:line:column: message`, the file relative to the folder.
    func problems(_ name: String = "main.yaml") -> [String] {
        switch load(name) {
        case .success: []
        case .failure(let error):
            error.diagnostics.map { $0.formatted(file: error.file).replacingOccurrences(of: path + "/", with: "") }
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct IncludeTests {
    @Test func includedFilesAndADirectoryInNameOrder() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: [extra.yaml, conf.d]\nsources:\n  a: { kind: fake }\n")
        try folder.write("extra.yaml", "sources:\n  b: { kind: fake }\nviews:\n  v: { sources: [a, b, c] }\n")
        try folder.write("conf.d/20-late.yaml", "sources:\n  d: { kind: fake }\n")
        try folder.write("conf.d/10-early.yaml", "include: ../more/c.yaml\nbases:\n  quick: { refresh: 3s }\n")
        try folder.write("conf.d/ignored.yml", "nonsense: [")
        try folder.write("more/c.yaml", "sources:\n  c: { base: quick, kind: fake }\n")
        let loaded = try folder.load().get()
        #expect(loaded.configuration.sources.map(\.id) == ["a", "b", "c", "d"])
        #expect(loaded.configuration.views.map(\.id) == ["v"])
        #expect(loaded.configuration.source("c")?.refresh == .seconds(3))
        #expect(loaded.files.directories == [folder.path + "/./conf.d"] || loaded.files.directories == [folder.path + "/conf.d"])
        #expect(loaded.files.files.count == 5)
    }

    @Test func duplicatesAreReportedAtBothPlaces() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: b.yaml\nsources:\n  x: { kind: fake }\n")
        try folder.write("b.yaml", "# b\nsources:\n  y: { kind: fake }\n  x: { kind: fake }\n")
        #expect(
            folder.problems() == [
                #"b.yaml:4:3: source "x" is declared twice; first at main.yaml:3:3"#,
                #"main.yaml:3:3: source "x" is declared twice; again at b.yaml:4:3"#,
            ])
    }

    @Test func problemsInAnIncludedFileCarryItsName() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: [b.yaml]\nsources:\n  a: { kind: fake }\n")
        try folder.write("b.yaml", "defaults: { refresh: 1s }\nsources:\n  b: { kind: fake, refresh: soon }\n")
        let found = folder.problems()
        #expect(found.count == 2)
        #expect(found.contains { $0.hasPrefix("b.yaml:1:1: `defaults:` belongs in the main file") })
        #expect(found.contains { $0.hasPrefix("b.yaml:3:29: refresh:") })
    }

    @Test func aMissingFileIsReportedAtTheIncludeEntry() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include:\n  - there.yaml\n  - not-there.yaml\nsources:\n  a: { kind: fake }\n")
        try folder.write("there.yaml", "views: {}\n")
        let found = folder.problems()
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix(#"main.yaml:3:5: include "not-there.yaml": no such file or directory"#) == true)
    }

    @Test func anIncludeCycleIsReported() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: a.yaml\nsources:\n  s: { kind: fake }\n")
        try folder.write("a.yaml", "include: b.yaml\n")
        try folder.write("b.yaml", "include: [a.yaml]\n")
        #expect(
            folder.problems() == [
                "b.yaml:1:11: include cycle: a.yaml → b.yaml → a.yaml; a file may not include itself, however indirectly"
            ])
    }

    /// A chain of 40 files, each including the next: reported once, at the include that goes too deep,
    /// rather than recursing as far as the files go.
    @Test func includesNestedPastTheLimitAreReported() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: f1.yaml\nsources:\n  s: { kind: fake }\n")
        for level in 1..<40 { try folder.write("f\(level).yaml", "include: f\(level + 1).yaml\n") }
        try folder.write("f40.yaml", "sources:\n  t: { kind: fake }\n")
        #expect(
            folder.problems() == [
                #"f31.yaml:1:10: include "f32.yaml": files include each other more than 32 deep; include them from fewer levels"#
            ])
    }

    /// conf.d with 2,000 files: each is read once and checked against those before it in constant time.
    @Test func aDirectoryOfTwoThousandFiles() async throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: conf.d\n")
        try await folder.write((0..<2000).map { number in ("conf.d/\(number).yaml", "sources:\n  s\(number): { kind: fake }\n") })
        let loaded = try folder.load().get()
        #expect(loaded.configuration.sources.count == 2000)
        #expect(loaded.files.files.count == 2001)
    }

    @Test func aBaseInAnIncludedFileReportsPluginProblemsThere() throws {
        let folder = try ConfigurationFolder()
        defer { folder.remove() }
        try folder.write("main.yaml", "include: bases.yaml\nsources:\n  a: { base: api, url: /x }\n")
        try folder.write("bases.yaml", "bases:\n  api:\n    kind: rest\n    url: https://h\n    headers:\n      A: b\n")
        let loaded = try folder.load().get()
        #expect(loaded.configuration.source("a")?.options["url"] == "https://h/x")
        let diagnostic = loaded.diagnostic(source: "a", problem: OptionProblem(pointer: JSONPointer(tokens: ["url"]), message: "m"))
        #expect(diagnostic.file == loaded.file)  // the joined url stands where the source wrote its part
        let header = loaded.diagnostic(
            source: "a", problem: OptionProblem(pointer: JSONPointer(tokens: ["headers", "A"]), message: "m"))
        #expect(header.formatted(file: loaded.file) == #"\#(folder.path)/bases.yaml:6:7: source "a": m"#)
    }
}
