import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@testable import HammockShellPlugin

/// The shell kind's options schema (in its hello, for `hammock schema`) describes exactly the keys its
/// options reader knows, and is well-formed.
@Suite struct ShellOptionsSchemaTests {
    /// Every key its options reader reads, the schema describes, and no other.
    @Test func itDescribesExactlyTheKeysItReads() throws {
        #expect(try optionKeysRead(in: "plugins/shell/Library/ShellOptions.swift") == Set(JSONSchema.propertyNames(of: ShellOptions.schema)))
    }

    @Test func itDescribesExactlyTheKnownKeys() {
        #expect(JSONSchema.propertyNames(of: ShellOptions.schema) == ShellOptions.keys)
        #expect(ShellPlugin.optionsSchema.keys.sorted() == ShellPlugin.kinds)
    }

    @Test func itIsWellFormedAndClosed() {
        #expect(JSONSchemaCheck.problems(in: ShellOptions.schema).isEmpty)
        #expect(ShellOptions.schema["additionalProperties"] == false)
        #expect(ShellOptions.schema["oneOf"] == [["required": ["command"]], ["required": ["script"]]])
        let parse = ShellOptions.schema["properties"]?["parse"]?["anyOf"]?.arrayValue?.first
        #expect(parse == .object(["enum": .array(OutputFormat.allCases.map { .string($0.rawValue) })]))
    }
}

