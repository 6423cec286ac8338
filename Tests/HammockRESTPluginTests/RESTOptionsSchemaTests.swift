import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@testable import HammockRESTPlugin

/// The rest kind's options schema (in its hello, for `hammock schema`) describes exactly the keys its
/// options reader knows, at the top and under `paginate`, and is well-formed.
@Suite struct RESTOptionsSchemaTests {
    /// Every key its options reader reads, the schema describes, and no other.
    @Test func itDescribesExactlyTheKeysItReads() throws {
        #expect(try optionKeysRead(in: "plugins/rest/Library/RESTOptions.swift") == Set(JSONSchema.propertyNames(of: RESTOptions.schema)))
    }

    @Test func itDescribesExactlyTheKnownKeys() {
        #expect(JSONSchema.propertyNames(of: RESTOptions.schema) == RESTOptions.keys)
        #expect(JSONSchema.propertyNames(of: RESTOptions.schema["properties"]?["paginate"] ?? .null) == Pagination.keys)
        #expect(RESTPlugin.optionsSchema.keys.sorted() == RESTPlugin.kinds)
    }

    @Test func itIsWellFormedAndClosed() {
        #expect(JSONSchemaCheck.problems(in: RESTOptions.schema).isEmpty)
        #expect(RESTOptions.schema["additionalProperties"] == false)
        #expect(RESTOptions.schema["required"] == ["url"])
        let parse = RESTOptions.schema["properties"]?["parse"]?["anyOf"]?.arrayValue?.first
        #expect(parse == ["enum": ["json", "jsonl", "text"]])
    }

    /// `method` is read in any case, so the pattern takes any case; the enum is there for completion.
    @Test func theMethodPatternTakesAnyCase() throws {
        let pattern = RESTOptions.caseInsensitivePattern(RESTOptions.methods)
        let regex = try Regex(pattern)
        for method in ["GET", "get", "Post", "dElEtE", "HEAD"] { #expect(method.wholeMatch(of: regex) != nil, "\(method)") }
        for method in ["GETS", "TRACE", ""] { #expect(method.wholeMatch(of: regex) == nil, "\(method)") }
    }
}

