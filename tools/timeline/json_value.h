// JsonValue: an in-memory JSON document for kolo-timeline (trace events, the --json summary).
// Objects keep their members in file order so that `merge` writes events back as it read them.
// Built by json_reader.h, written by ToJson(). A value type with no shared state: like
// std::string, distinct values may be used on distinct threads.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"

namespace kolo::timeline {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  using Member = std::pair<std::string, JsonValue>;
  using Object = std::vector<Member>;  // file order; keys are unique (the reader checks)

  JsonValue() = default;                                               // null
  JsonValue(bool value) : type_(Type::kBool), bool_(value) {}          // NOLINT: implicit by design
  JsonValue(double value) : type_(Type::kNumber), number_(value) {}    // NOLINT
  JsonValue(int value) : JsonValue(static_cast<double>(value)) {}      // NOLINT
  JsonValue(int64_t value) : JsonValue(static_cast<double>(value)) {}  // NOLINT
  JsonValue(std::string value) : type_(Type::kString), string_(std::move(value)) {}  // NOLINT
  JsonValue(const char* value) : JsonValue(std::string(value)) {}                    // NOLINT
  JsonValue(Array value) : type_(Type::kArray), array_(std::move(value)) {}          // NOLINT
  JsonValue(Object value) : type_(Type::kObject), object_(std::move(value)) {}       // NOLINT

  static JsonValue EmptyArray() { return JsonValue(Array{}); }
  static JsonValue EmptyObject() { return JsonValue(Object{}); }

  Type type() const { return type_; }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_number() const { return type() == Type::kNumber; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Accessors of the held type; calling the wrong one is a programmer error (aborts).
  bool as_bool() const { return Check(Type::kBool).bool_; }
  double as_number() const { return Check(Type::kNumber).number_; }
  const std::string& as_string() const { return Check(Type::kString).string_; }
  const Array& as_array() const { return Check(Type::kArray).array_; }
  Array& as_array() { return Check(Type::kArray).array_; }
  const Object& as_object() const { return Check(Type::kObject).object_; }
  Object& as_object() { return Check(Type::kObject).object_; }

  // The member `key` of an object; nullptr when this is not an object or has no such key.
  const JsonValue* Find(std::string_view key) const;
  JsonValue* Find(std::string_view key);
  // Replaces member `key` of an object, or appends it. Aborts if this is not an object.
  void Set(std::string_view key, JsonValue value);
  // Appends to an array. Aborts if this is not an array.
  void Append(JsonValue value) { as_array().push_back(std::move(value)); }

  friend bool operator==(const JsonValue& a, const JsonValue& b);

 private:
  const JsonValue& Check(Type type) const {
    KOLO_CHECK(type_ == type) << "a JSON value read as another type";
    return *this;
  }
  JsonValue& Check(Type type) {
    KOLO_CHECK(type_ == type) << "a JSON value read as another type";
    return *this;
  }

  // Plain members rather than std::variant: GCC 12 reports false -Wmaybe-uninitialized on
  // moved-from variants of this shape. Only the member of type_ is meaningful.
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// "null", "boolean", "number", ... for error messages.
const char* JsonTypeName(JsonValue::Type type);

// Compact JSON text of `value` (no spaces, members in order). Numbers are written as
// integers when they are whole and exactly representable, otherwise in the shortest form
// that reads back to the same double.
std::string ToJson(const JsonValue& value);
void AppendJson(const JsonValue& value, std::string* out);

// Appends `number` / `text` as JSON (a quoted, escaped string for text).
void AppendJsonNumber(double number, std::string* out);
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace kolo::timeline
