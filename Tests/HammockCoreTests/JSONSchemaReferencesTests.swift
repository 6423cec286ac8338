import HammockCore
import HammockJSON
import Testing

/// The `$ref`s of a kind's options schema: which `hammock schema` can place inside the configuration's
/// schema (rewritten to their new place), and which it refuses.
@Suite struct JSONSchemaReferencesTests {
    static func parse(_ text: String) throws -> JSONValue { try JSONValue(parsing: Array(text.utf8)) }

    static func messages(_ text: String) throws -> [String] {
        JSONSchemaReferences.problems(in: try parse(text)).map { "\($0.pointer): \($0.message)" }
    }

    @Test func referencesAreRewrittenToThePlaceTheSchemaGoes() throws {
        let schema = try Self.parse(
            ##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"a/b": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a~1b"}, "self": {"$ref": "#"}}, "default": {"$ref": "#/data"}}"##)
        #expect(JSONSchemaReferences.problems(in: schema).isEmpty)
        let placed = JSONSchemaReferences.rebased(schema, at: JSONPointer(tokens: ["$defs", "kind:weather"]))
        #expect(placed["properties"]?["x"]?["$ref"] == "#/$defs/kind:weather/$defs/a~1b")
        #expect(placed["properties"]?["self"]?["$ref"] == "#/$defs/kind:weather")
        // Data is data, and a document's own keywords are left to the document.
        #expect(placed["default"] == ["$ref": "#/data"])
        #expect(placed["$schema"] == nil)
    }

    @Test func aLoopThroughReferencesAndInPlaceKeywordsIsRefused() throws {
        let direct = try Self.messages(##"{"$ref": "#"}"##)
        #expect(direct.count == 1 && direct[0].contains("$ref loop"), "\(direct)")
        let through = try Self.messages(
            ##"{"$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}}, "properties": {"x": {"$ref": "#/$defs/a"}}}"##)
        #expect(through.count == 1 && through[0].contains("$ref loop"), "\(through)")
        // Down into the value (properties, items) is recursion, which ends with the value.
        #expect(try Self.messages(##"{"$defs": {"t": {"properties": {"kids": {"items": {"$ref": "#/$defs/t"}}}}}, "properties": {"tree": {"$ref": "#/$defs/t"}}}"##).isEmpty)
    }

    @Test func aReferenceThatLeadsNowhereOrLeavesIsRefused() throws {
        #expect(
            try Self.messages(##"{"properties": {"x": {"$ref": "#/$defs/none"}}}"##) == [
                ##"/properties/x/$ref: $ref "#/$defs/none" leads nowhere: the options schema has nothing at /$defs/none"##
            ])
        for written in ["https://example.org/s.json", "other.json#/a", "#anchor"] {
            let found = try Self.messages(##"{"properties": {"x": {"$ref": "\##(written)"}}}"##)
            #expect(found.count == 1 && found[0].contains("leaves the options schema"), "\(written): \(found)")
        }
    }
}
