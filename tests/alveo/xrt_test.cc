// The XRT transport on a machine without an Alveo card (CI): XRT itself runs (Debian's
// libxrt), enumerates no device, and the backend says so; xclbin files are checked
// against this build's kernel without a card, through XRT's own xclbin parser. The
// xclbins here are built the way v++ lays one out (an axlf header, IP_LAYOUT, and the
// kernel's description in EMBEDDED_METADATA), with the arguments this tree's register map
// gives (rtl/alveo/kernel.xml) or deliberately different ones.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/clock.h"
#include "vsl/hw/regmap.h"
#include "vsl/hw/xrt_port.h"

// XRT's xclbin file format (plain C structs), as v++ writes it.
#include <xclbin.h>

namespace vsl::testing {
namespace {

struct TestArg {
  std::string name, port;
  uint32_t offset;
};

// The kernel's arguments as this tree's register map has them.
std::vector<TestArg> ThisBuildsArgs() {
  std::vector<TestArg> v;
  for (const auto& a : hw::regs::kernel::kArgs) v.push_back({a.name, a.port, a.offset});
  return v;
}

// Writes an xclbin with one kernel IP named `ip` ("kernel:{instance}") and, if `args` is
// non-empty, the kernel's metadata with those arguments.
void WriteXclbin(const std::string& path, const std::string& ip, const std::vector<TestArg>& args) {
  std::vector<std::pair<uint32_t, std::vector<char>>> sections;
  std::vector<char> layout(sizeof(ip_layout), 0);
  ip_layout l{};
  l.m_count = 1;
  l.m_ip_data[0].m_type = IP_KERNEL;
  l.m_ip_data[0].m_base_address = 0x1800000;
  std::strncpy(reinterpret_cast<char*>(l.m_ip_data[0].m_name), ip.c_str(), sizeof(l.m_ip_data[0].m_name) - 1);
  std::memcpy(layout.data(), &l, sizeof l);
  sections.emplace_back(IP_LAYOUT, layout);
  if (!args.empty()) {
    const std::string kernel = ip.substr(0, ip.find(':'));
    std::string xml = fmt::format(
        "<?xml version=\"1.0\"?><project name=\"test\"><platform><device><core name=\"OCL_REGION_0\" "
        "target=\"hw\" type=\"clc_region\"><kernel name=\"{}\" language=\"ip\" preferredWorkGroupSizeMultiple=\"0\" "
        "workGroupSize=\"1\" interrupt=\"true\" hwControlProtocol=\"user_managed\">"
        "<port name=\"S_AXI_CONTROL\" mode=\"slave\" range=\"0x4000\" dataWidth=\"32\" portType=\"addressable\" "
        "base=\"0x0\"/>",
        kernel);
    for (size_t i = 0; i < args.size(); ++i) {
      xml += fmt::format(
          "<port name=\"{0}\" mode=\"master\" range=\"0xFFFFFFFFFFFFFFFF\" dataWidth=\"64\" portType=\"addressable\" "
          "base=\"0x0\"/><arg name=\"{1}\" addressQualifier=\"1\" id=\"{2}\" port=\"{0}\" size=\"0x8\" "
          "offset=\"0x{3:X}\" hostOffset=\"0x0\" hostSize=\"0x8\" type=\"void*\"/>",
          args[i].port, args[i].name, i, args[i].offset);
    }
    xml += fmt::format("<instance name=\"{}\"><addrRemap base=\"0x1800000\" range=\"0x4000\" "
                       "port=\"S_AXI_CONTROL\"/></instance></kernel></core></device></platform></project>",
                       ip.substr(ip.find('{') + 1, ip.find('}') - ip.find('{') - 1));
    sections.emplace_back(EMBEDDED_METADATA, std::vector<char>(xml.begin(), xml.end()));
  }
  const size_t header = sizeof(axlf) + (sections.size() - 1) * sizeof(axlf_section_header);
  std::vector<char> out(header, 0);
  for (const auto& s : sections) out.insert(out.end(), s.second.begin(), s.second.end());
  axlf a{};
  std::memcpy(a.m_magic, "xclbin2", 8);
  a.m_signature_length = -1;
  std::memset(a.reserved, 0xFF, sizeof a.reserved);
  a.m_header.m_length = out.size();
  a.m_header.m_versionMajor = 2;
  for (int i = 0; i < 16; ++i) a.m_header.uuid[i] = static_cast<unsigned char>(0xA0 + i);
  a.m_header.m_numSections = static_cast<uint32_t>(sections.size());
  std::memcpy(out.data(), &a, sizeof a - sizeof(axlf_section_header));
  size_t off = header;
  for (size_t i = 0; i < sections.size(); ++i) {
    axlf_section_header h{};
    h.m_sectionKind = sections[i].first;
    h.m_sectionOffset = off;
    h.m_sectionSize = sections[i].second.size();
    std::memcpy(out.data() + offsetof(axlf, m_sections) + i * sizeof h, &h, sizeof h);
    off += sections[i].second.size();
  }
  std::ofstream(path, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
}

TEST(XrtTest, NoCardIsAnEmptyListAndAClearError) {
  auto cards = hw::ListAlveoCards();
  ASSERT_TRUE(cards.ok()) << cards.status().ToString();
  if (!cards->empty()) GTEST_SKIP() << "an Alveo card is present: this test is for machines without one";
  TempDir tmp;
  const std::string good = tmp.Sub("vsl_kernel.xclbin");
  WriteXclbin(good, "vsl_kernel:{vsl_kernel_1}", ThisBuildsArgs());
  auto port = hw::XrtPort::Open({0, good, 4ull << 20});
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), StatusCode::kNotFound);
  EXPECT_NE(port.status().message().find("no Alveo card"), std::string::npos) << port.status().ToString();
  // The raw-flash entry point says the same, at once, on the clock's engine.
  VirtualClock clock(1);
  std::optional<Result<hw::AlveoCardPipes>> card;
  hw::OpenAlveoCard({0, good, 4ull << 20}, {}, clock, [&](Result<hw::AlveoCardPipes> r) { card = std::move(r); });
  clock.RunUntilTrue([&] { return card.has_value(); }, 1000);
  ASSERT_TRUE(card.has_value());
  EXPECT_EQ(card->status().code(), StatusCode::kNotFound) << card->status().ToString();
  auto lines = hw::DescribeAlveoCards(good);
  ASSERT_FALSE(lines.ok());
  EXPECT_NE(lines.status().message().find("xocl"), std::string::npos) << "the message says what to check";
}

TEST(XrtTest, XclbinOfThisBuildIsAccepted) {
  TempDir tmp;
  const std::string path = tmp.Sub("vsl_kernel.xclbin");
  WriteXclbin(path, "vsl_kernel:{vsl_kernel_1}", ThisBuildsArgs());
  auto img = hw::InspectXclbin(path);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->ip_name, "vsl_kernel:{vsl_kernel_1}");
  EXPECT_EQ(img->uuid, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  ASSERT_EQ(img->args.size(), 4u);
  EXPECT_EQ(img->arg("store1")->offset, hw::regs::emu::At(1, hw::regs::emu::kStoreBaseLo));
  EXPECT_EQ(img->arg("pipe0_ring")->offset, hw::regs::pipe::At(0, hw::regs::pipe::kSqBaseLo));
}

TEST(XrtTest, MismatchedXclbinsAreRefusedByName) {
  TempDir tmp;
  // Not a file, not an xclbin.
  auto r = hw::InspectXclbin(tmp.Sub("missing.xclbin"));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a readable xclbin"), std::string::npos) << r.status().ToString();
  const std::string junk = tmp.Sub("junk.xclbin");
  std::ofstream(junk) << "this is not an xclbin\n";
  r = hw::InspectXclbin(junk);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  // Another kernel.
  const std::string other = tmp.Sub("other.xclbin");
  WriteXclbin(other, "vadd:{vadd_1}", {{"a", "m_axi_gmem", 0x10}});
  r = hw::InspectXclbin(other);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no vsl_kernel kernel (its IPs: vadd:{vadd_1})"), std::string::npos)
      << r.status().ToString();
  // The kernel from another register map: an argument moved, an argument missing.
  auto moved = ThisBuildsArgs();
  moved[3].offset = 0x3000;
  const std::string m = tmp.Sub("moved.xclbin");
  WriteXclbin(m, "vsl_kernel:{vsl_kernel_1}", moved);
  r = hw::InspectXclbin(m);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(fmt::format("{} at 0x3000, this host expects {:#x}", moved[3].name,
                                                  hw::regs::kernel::kArgs[3].offset)),
            std::string::npos)
      << r.status().ToString();
  auto fewer = ThisBuildsArgs();
  fewer.pop_back();
  const std::string f = tmp.Sub("fewer.xclbin");
  WriteXclbin(f, "vsl_kernel:{vsl_kernel_1}", fewer);
  r = hw::InspectXclbin(f);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("has no argument store1"), std::string::npos) << r.status().ToString();
  // Open checks the xclbin before looking for a card.
  auto port = hw::XrtPort::Open({0, m, 4ull << 20});
  EXPECT_EQ(port.status().code(), StatusCode::kFailedPrecondition) << port.status().ToString();
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

// The xrt: backend's board sensors come from XRT's thermal and electrical reports (the
// JSON `xbutil examine -r thermal,electrical --format JSON` prints per device).
TEST(XrtTest, BoardSensorReportsAreRead) {
  const std::string thermal = R"({"thermals":[
      {"location_id":"pcb_top_front","description":"PCB Top Front","is_present":"true","temp_C":"36"},
      {"location_id":"fpga0","description":"FPGA","is_present":"true","temp_C":"52"},
      {"location_id":"vccint","description":"VCCINT","is_present":"false","temp_C":"0"}]})";
  auto t = hw::ParseXrtFpgaTemperature(thermal);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(*t, 52.0);
  // Without an fpga0 sensor: the hottest present one.
  auto t2 = hw::ParseXrtFpgaTemperature(R"({"thermals":[{"location_id":"a","temp_C":40},{"location_id":"b","temp_C":"44.5"}]})");
  ASSERT_TRUE(t2.ok());
  EXPECT_DOUBLE_EQ(*t2, 44.5);
  auto w = hw::ParseXrtBoardPower(R"({"power_rails":[],"power_consumption_max_watts":"75","power_consumption_watts":"23.104"})");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_DOUBLE_EQ(*w, 23.104);
  // Reports without readings, or not JSON: a clear NotFound, never a crash.
  EXPECT_EQ(hw::ParseXrtFpgaTemperature("{}").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hw::ParseXrtFpgaTemperature("not json").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hw::ParseXrtFpgaTemperature(R"({"thermals":[{"is_present":"false","temp_C":"9"}]})").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(hw::ParseXrtBoardPower(R"({"power_consumption_watts":"n/a"})").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace vsl::testing
