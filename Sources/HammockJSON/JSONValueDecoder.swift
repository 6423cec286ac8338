/// Decodes a `Decodable` value from a `JSONValue`. A `JSONValue` or `JSONNumber` member is handed over as
/// it is (members in their order, numbers as their text); integers must be exact (`1e3` is 1000, `1.5`
/// and `12345678901234567890` are no `Int`); a floating-point member must be finite once read (`1e400` is
/// not a `Double`). `decodeIfPresent` reads an absent member and `null` alike as nil; members the type does
/// not know are ignored.
///
/// Each error's `debugDescription` reads after the name of the member it is about ("must be an integer,
/// got a string", "is missing"), so `DecodingError.summary` can quote the path and the reason together.
public struct JSONValueDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try ValueDecoder(value: value, codingPath: []).decode(T.self)
    }
}

extension DecodingError {
    /// Where the error is: the coding path as a JSON Pointer into the decoded value.
    public var pointer: JSONPointer {
        JSONPointer(tokens: (context?.codingPath ?? []).map { $0.intValue.map(String.init) ?? $0.stringValue })
    }

    /// The member and what is wrong with it, e.g. `"errors/0/message" must be a string, got a number` (the
    /// pointer without its leading "/"), `"id" is missing`, or `the value must be an object, got an array`.
    public var summary: String { summary() }

    /// `summary`, calling the value as a whole `whole` ("the line", "the request").
    public func summary(whole: String = "the value") -> String {
        let reason = context?.debugDescription ?? "is not what was expected"
        var path = pointer
        if case .keyNotFound(let key, _) = self { path = path.appending(key.stringValue) }
        let text = path.description
        return text.isEmpty ? "\(whole) \(reason)" : "\"\(text.dropFirst())\" \(reason)"
    }

    private var context: Context? {
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
            .dataCorrupted(let context):
            context
        @unknown default:
            nil
        }
    }
}

struct ValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch(JSONObject.self, "an object") }
        return KeyedDecodingContainer(KeyedContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self, "a list") }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        let context = DecodingError.Context(codingPath: codingPath, debugDescription: "must be \(expected), got \(value.kindName)")
        return value.isNull ? .valueNotFound(type, context) : .typeMismatch(type, context)
    }

    func corrupted(_ reason: String) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: codingPath, debugDescription: reason))
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number(let number) = value else { throw mismatch(T.self, "an integer") }
        if let exact = number.intValue.flatMap(T.init(exactly:)) ?? T(number.text) { return exact }
        let integral = !number.text.utf8.contains { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") }
        throw corrupted(integral ? "must be an integer from \(T.min) to \(T.max), got \(number)" : "must be an integer, got \(number)")
    }

    func floatingPoint<T: BinaryFloatingPoint>(_ type: T.Type) throws -> T {
        guard case .number(let number) = value else { throw mismatch(T.self, "a number") }
        let converted = T(number.doubleValue)
        guard converted.isFinite else { throw corrupted("must be a number \(T.self) can hold, got \(number)") }
        return converted
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // Handed over as they are: the point of this decoder is that they keep their order and their text.
        if T.self == JSONValue.self { return value as! T }
        if T.self == JSONNumber.self {
            guard case .number(let number) = value else { throw mismatch(T.self, "a number") }
            return number as! T
        }
        return try T(from: self)
    }
}

extension ValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value.isNull }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch(Bool.self, "true or false") }
        return bool
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let string) = value else { throw mismatch(String.self, "a string") }
        return string
    }

    func decode(_ type: Double.Type) throws -> Double { try floatingPoint(Double.self) }
    func decode(_ type: Float.Type) throws -> Float { try floatingPoint(Float.self) }
    func decode(_ type: Int.Type) throws -> Int { try integer(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(UInt64.self) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func member(_ key: Key) throws -> ValueDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "is missing"))
        }
        return ValueDecoder(value: value, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try member(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try member(key).decode(Bool.self) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try member(key).decode(String.self) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try member(key).decode(Double.self) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try member(key).decode(Float.self) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try member(key).decode(Int.self) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try member(key).decode(Int8.self) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try member(key).decode(Int16.self) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try member(key).decode(Int32.self) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try member(key).decode(Int64.self) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try member(key).decode(UInt.self) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try member(key).decode(UInt8.self) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try member(key).decode(UInt16.self) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try member(key).decode(UInt32.self) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try member(key).decode(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try member(key).decode(T.self) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try member(key).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try member(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        let key = JSONCodingKey(stringValue: "super")
        return ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// The next element's decoder; the index moves on only once the element has decoded.
    private func next(_ type: Any.Type) throws -> ValueDecoder {
        let path = codingPath + [JSONCodingKey(intValue: currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, DecodingError.Context(codingPath: path, debugDescription: "is missing: the list has \(elements.count) elements"))
        }
        return ValueDecoder(value: elements[currentIndex], codingPath: path)
    }

    private mutating func advance<T>(_ read: (ValueDecoder) throws -> T) throws -> T {
        let decoded = try read(try next(T.self))
        currentIndex += 1
        return decoded
    }

    mutating func decodeNil() throws -> Bool {
        let isNull = try next(Never.self).decodeNil()
        if isNull { currentIndex += 1 }
        return isNull
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try advance { try $0.decode(Bool.self) } }
    mutating func decode(_ type: String.Type) throws -> String { try advance { try $0.decode(String.self) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try advance { try $0.decode(Double.self) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try advance { try $0.decode(Float.self) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try advance { try $0.decode(Int.self) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try advance { try $0.decode(Int8.self) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try advance { try $0.decode(Int16.self) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try advance { try $0.decode(Int32.self) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try advance { try $0.decode(Int64.self) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try advance { try $0.decode(UInt.self) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try advance { try $0.decode(UInt8.self) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try advance { try $0.decode(UInt16.self) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try advance { try $0.decode(UInt32.self) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try advance { try $0.decode(UInt64.self) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try advance { try $0.decode(T.self) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try advance { try $0.container(keyedBy: NestedKey.self) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try advance { try $0.unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try advance { $0 }
    }
}
