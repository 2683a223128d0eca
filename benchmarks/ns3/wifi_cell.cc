// One 802.11a cell in ns-3.37: a server behind the access point (1 Gbit/s point-to-point), k
// stations at given distances from the access point, each moving one model of S bytes over
// TCP, all starting together: either the server sends to every station (download) or every
// station sends to the server (upload). Prints each station's completion time (s) after the
// start, one line "station <i> <seconds>".
//
// Build (benchmarks/ns3_cell.py does it): g++ -O2 -std=c++17 wifi_cell.cc -o wifi_cell \
//   $(pkg-config --libs ns3-wifi ns3-internet ns3-applications ns3-mobility ns3-point-to-point)
// Run: wifi_cell --bytes=S --direction=down|up --distances=d1,d2,... [--manager=ideal|NAME]
//
// Rates: IdealWifiManager picks each station's 802.11a rate from its SNR (log-distance
// propagation, ns-3's defaults), so stations farther away get slower rates; with
// --manager=OfdmRate54Mbps (or another 802.11a mode) every device sends at that rate.
// No fading and no other traffic: what differs from netsim's fluid model is the MAC (DCF
// backoff, collisions, ACKs, headers) and TCP.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/wifi-module.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

static std::vector<double> g_done;
static std::vector<uint64_t> g_received;
static uint64_t g_bytes = 0;
static const double kStart = 1.0;

static void
OnRx(uint32_t station, Ptr<const Packet> packet, const Address&)
{
    g_received[station] += packet->GetSize();
    if (g_done[station] < 0 && g_received[station] >= g_bytes)
    {
        g_done[station] = Simulator::Now().GetSeconds() - kStart;
    }
}

int
main(int argc, char* argv[])
{
    uint64_t bytes = 1000000;
    std::string direction = "down";
    std::string distances = "5";
    std::string manager = "ideal";
    uint32_t seed = 1;
    CommandLine cmd;
    cmd.AddValue("bytes", "bytes each station moves", bytes);
    cmd.AddValue("direction", "down (server to stations) or up", direction);
    cmd.AddValue("distances", "comma-separated distances of the stations (m)", distances);
    cmd.AddValue("manager", "ideal, or an 802.11a mode for constant rates", manager);
    cmd.AddValue("seed", "run number (random backoff)", seed);
    cmd.Parse(argc, argv);
    RngSeedManager::SetRun(seed);

    std::vector<double> dist;
    std::stringstream ss(distances);
    for (std::string item; std::getline(ss, item, ',');)
    {
        dist.push_back(std::stod(item));
    }
    const uint32_t k = dist.size();
    g_bytes = bytes;
    g_done.assign(k, -1.0);
    g_received.assign(k, 0);

    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));

    NodeContainer server, ap, stations;
    server.Create(1);
    ap.Create(1);
    stations.Create(k);

    WifiHelper wifi;
    wifi.SetStandard(WIFI_STANDARD_80211a);
    if (manager == "ideal")
    {
        wifi.SetRemoteStationManager("ns3::IdealWifiManager");
    }
    else
    {
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode",
                                     StringValue(manager), "ControlMode",
                                     StringValue("OfdmRate6Mbps"));
    }
    YansWifiChannelHelper channel = YansWifiChannelHelper::Default();
    YansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    WifiMacHelper mac;
    Ssid ssid("cell");
    mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer staDevices = wifi.Install(phy, mac, stations);
    mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer apDevice = wifi.Install(phy, mac, ap);

    MobilityHelper mobility;
    Ptr<ListPositionAllocator> positions = CreateObject<ListPositionAllocator>();
    positions->Add(Vector(0.0, 0.0, 0.0));
    for (uint32_t i = 0; i < k; ++i)
    {
        // on one side of the access point, 0.5 m apart sideways: every station hears every
        // other (no hidden terminals; 802.11a's range here is about 52 m)
        positions->Add(Vector(dist[i], 0.5 * i, 0.0));
    }
    mobility.SetPositionAllocator(positions);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(ap);
    mobility.Install(stations);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    p2p.SetChannelAttribute("Delay", StringValue("1ms"));
    NetDeviceContainer wired = p2p.Install(server.Get(0), ap.Get(0));

    InternetStackHelper stack;
    stack.Install(server);
    stack.Install(ap);
    stack.Install(stations);
    Ipv4AddressHelper address;
    address.SetBase("10.1.1.0", "255.255.255.0");
    Ipv4InterfaceContainer serverIf = address.Assign(wired);
    address.SetBase("10.1.2.0", "255.255.255.0");
    Ipv4InterfaceContainer staIf = address.Assign(staDevices);
    address.Assign(apDevice);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const bool down = direction == "down";
    for (uint32_t i = 0; i < k; ++i)
    {
        uint16_t port = 5000 + i;
        Ptr<Node> src = down ? server.Get(0) : stations.Get(i);
        Ptr<Node> dst = down ? stations.Get(i) : server.Get(0);
        Ipv4Address dstAddr = down ? staIf.GetAddress(i) : serverIf.GetAddress(0);
        PacketSinkHelper sink("ns3::TcpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sinkApp = sink.Install(dst);
        sinkApp.Start(Seconds(0.0));
        sinkApp.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, i));
        BulkSendHelper send("ns3::TcpSocketFactory", InetSocketAddress(dstAddr, port));
        send.SetAttribute("MaxBytes", UintegerValue(bytes));
        send.SetAttribute("SendSize", UintegerValue(1448));
        ApplicationContainer sendApp = send.Install(src);
        sendApp.Start(Seconds(kStart));
    }
    Simulator::Stop(Seconds(kStart + 600.0));
    Simulator::Run();
    Simulator::Destroy();
    for (uint32_t i = 0; i < k; ++i)
    {
        std::cout << "station " << i << " " << g_done[i] << std::endl;
    }
    return 0;
}
