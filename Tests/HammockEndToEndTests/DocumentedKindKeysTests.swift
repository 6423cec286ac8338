import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// docs/configuration.md documents every shipped kind's keys: each key of each kind's options schema (as the
/// kind's own plugin gives it in `hello`, read through `hammock schema`) has a row in that kind's section under
/// "Kinds that ship", or is a key every source has (the "Sources" table); and no row names a key the kind
/// does not have.
@Suite("DocumentedKindKeys")
struct DocumentedKindKeysTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The keys in the table rows (`| \`key\` | …`) of each `### \`kind\`` section under `## Kinds that ship`.
    static func documentedKeys(in page: String) -> [String: Set<String>] {
        var kinds: [String: Set<String>] = [:]
        var inShippedKinds = false
        var kind: String?
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                inShippedKinds = line == "## Kinds that ship"
                kind = nil
                continue
            }
            guard inShippedKinds else { continue }
            if line.hasPrefix("### "), let name = line.firstMatch(of: #/^### `([^`]+)`/#) {
                kind = String(name.output.1)
                kinds[kind!] = kinds[kind!] ?? []
                continue
            }
            if let kind, let row = line.firstMatch(of: #/^\| `([^`]+)` \|/#) {
                kinds[kind, default: []].insert(String(row.output.1))
            }
        }
        return kinds
    }

    @Test("every shipped kind's option keys have a row in docs/configuration.md, and every row is a key")
    func everyKindKeyIsDocumented() async throws {
        let run = try await HammockProcess.execute(["schema"])
        #expect(run.termination == .exited(0), "\(run.stderr)")
        let schema = try JSONValue(parsing: Array(run.stdout.utf8))
        let source = try #require(schema["$defs"]?["source"])
        let common = Set(try #require(source["properties"]?.objectValue).keys)
        var shipped: [String: Set<String>] = [:]
        for entry in try #require(source["allOf"]?.arrayValue) {
            guard let kind = entry["if"]?["properties"]?["kind"]?["const"]?.stringValue else { continue }
            // The kind's options stand once under $defs, where its branch refers to them.
            let options = try #require(schema["$defs"]?["kind:\(kind)"], "kind \(kind): no #/$defs/kind:\(kind)")
            #expect(entry["then"] == ["$ref": .string("#/$defs/kind:\(kind)")], "kind \(kind)")
            shipped[kind] = Set(try #require(options["properties"]?.objectValue, "kind \(kind)").keys)
        }
        #expect(Set(shipped.keys) == ["fake", "file", "rest", "shell"], "the shipped kinds changed: \(shipped.keys)")

        let page = try String(contentsOf: Self.root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let documented = Self.documentedKeys(in: page)
        for (kind, keys) in shipped.sorted(by: { $0.key < $1.key }) {
            guard let rows = documented[kind] else {
                Issue.record("docs/configuration.md has no section ### `\(kind)` under \"Kinds that ship\"")
                continue
            }
            let own = keys.subtracting(common)
            #expect(!own.isEmpty, "kind \(kind) has no keys of its own in the schema: the test reads the wrong thing")
            let missing = own.subtracting(rows).sorted()
            #expect(missing.isEmpty, "kind \(kind): no row in docs/configuration.md for \(missing)")
            let unknown = rows.subtracting(keys).sorted()
            #expect(unknown.isEmpty, "kind \(kind): docs/configuration.md has rows for keys it does not have: \(unknown)")
        }
    }
}
