import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@testable import HammockFilePlugin

/// The file kind's options schema (in its hello, for `hammock schema`) describes exactly the keys its
/// options reader knows, and is well-formed.
@Suite struct FileOptionsSchemaTests {
    /// Every key its options reader reads, the schema describes, and no other.
    @Test func itDescribesExactlyTheKeysItReads() throws {
        #expect(try optionKeysRead(in: "plugins/file/Library/FileOptions.swift") == Set(JSONSchema.propertyNames(of: FileOptions.schema)))
    }

    @Test func itDescribesExactlyTheKnownKeys() {
        #expect(JSONSchema.propertyNames(of: FileOptions.schema) == FileOptions.known)
        #expect(FilePlugin.optionsSchema.keys.sorted() == FilePlugin.kinds)
    }

    @Test func itIsWellFormedAndClosed() {
        #expect(JSONSchemaCheck.problems(in: FileOptions.schema).isEmpty)
        #expect(FileOptions.schema["additionalProperties"] == false)
        #expect(FileOptions.schema["required"] == ["path"])
    }
}

