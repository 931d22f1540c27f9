/*
 * A standalone Hive Metastore 3.1.3 whose Thrift server listens on one address (127.0.0.1 for Cryo's
 * tests) instead of every interface. Upstream's HiveMetaStore.startMetaStore binds the wildcard address
 * (SecurityUtils.getServerSocket(null, port)); the bind-host setting came with Hive 4. This is the
 * unsecured (no SASL, no SSL) branch of upstream's startMetaStore, as it is in 3.1.3, with the server
 * socket made for the given address: the same handler (HMSHandler behind RetryingHMSHandler), processor
 * (TUGIBasedProcessor when metastore.execute.setugi, the default), transports, protocols, worker pool
 * and server event handler (thread-local RawStore clean-up when a client goes). The compactor and the
 * remote-only housekeeping threads (HiveMetaStore.startMetaStoreThreads) are not started.
 *
 * Compiled by Cryo's scripts/peers.sh against the metastore's jars; started by scripts/services.sh:
 *   java -cp 'conf:lib/*:cryo-metastore.jar' -Dcryo.hms.host=127.0.0.1 -Dcryo.hms.port=9083 \
 *     org.apache.hadoop.hive.metastore.CryoMetastore
 * Configuration comes from conf/metastore-site.xml (MetastoreConf), as for upstream's server.
 */
package org.apache.hadoop.hive.metastore;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf.ConfVars;
import org.apache.hadoop.hive.metastore.metrics.Metrics;
import org.apache.hadoop.hive.metastore.metrics.MetricsConstants;
import org.apache.hadoop.hive.metastore.security.TUGIContainingTransport;
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.protocol.TCompactProtocol;
import org.apache.thrift.protocol.TProtocolFactory;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TServerEventHandler;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class CryoMetastore {
  private CryoMetastore() {}

  public static void main(String[] args) throws Throwable {
    String host = System.getProperty("cryo.hms.host", "127.0.0.1");
    int port = Integer.getInteger("cryo.hms.port", 9083);
    Configuration conf = MetastoreConf.newMetastoreConf();
    if (MetastoreConf.getBoolVar(conf, ConfVars.USE_THRIFT_SASL) || MetastoreConf.getBoolVar(conf, ConfVars.USE_SSL)
        || MetastoreConf.getBoolVar(conf, ConfVars.USE_THRIFT_FRAMED_TRANSPORT)) {
      throw new IllegalArgumentException("CryoMetastore runs the plain Thrift server only (no SASL, SSL or framed transport)");
    }
    if (MetastoreConf.getBoolVar(conf, ConfVars.METRICS_ENABLED)) {
      Metrics.initialize(conf);
    }
    // What upstream's startMetaStore sets (private statics): the handler asks whether it runs remotely,
    // and the server event handler below counts connections in openConnections.
    setStatic("isMetaStoreRemote", true);
    setStatic("openConnections", Metrics.getOrCreateGauge(MetricsConstants.OPEN_CONNECTIONS));

    long maxMessageSize = MetastoreConf.getLongVar(conf, ConfVars.SERVER_MAX_MESSAGE_SIZE);
    TProtocolFactory protocolFactory;
    TProtocolFactory inputProtoFactory;
    if (MetastoreConf.getBoolVar(conf, ConfVars.USE_THRIFT_COMPACT_PROTOCOL)) {
      protocolFactory = new TCompactProtocol.Factory();
      inputProtoFactory = new TCompactProtocol.Factory(maxMessageSize, maxMessageSize);
    } else {
      protocolFactory = new TBinaryProtocol.Factory();
      inputProtoFactory = new TBinaryProtocol.Factory(true, true, maxMessageSize, maxMessageSize);
    }
    HiveMetaStore.HMSHandler baseHandler = new HiveMetaStore.HMSHandler("new db based metaserver", conf, false);
    IHMSHandler handler = RetryingHMSHandler.getProxy(conf, baseHandler, false);
    TProcessor processor;
    TTransportFactory transFactory;
    if (MetastoreConf.getBoolVar(conf, ConfVars.EXECUTE_SET_UGI)) {
      transFactory = new TUGIContainingTransport.Factory();
      processor = new TUGIBasedProcessor<>(handler);
    } else {
      transFactory = new TTransportFactory();
      processor = new TSetIpAddressProcessor<>(handler);
    }
    TServerSocket serverSocket = new TServerSocket(new InetSocketAddress(host, port));
    if (MetastoreConf.getBoolVar(conf, ConfVars.TCP_KEEP_ALIVE)) {
      serverSocket = new TServerSocketKeepAlive(serverSocket);
    }
    TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(serverSocket)
        .processor(processor)
        .transportFactory(transFactory)
        .protocolFactory(protocolFactory)
        .inputProtocolFactory(inputProtoFactory)
        .minWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MIN_THREADS))
        .maxWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MAX_THREADS));
    TServer server = new TThreadPoolServer(serverArgs);
    // Upstream's own event handler (an anonymous class of HiveMetaStore): connection count and the
    // thread-local RawStore clean-up when a client disconnects without closing.
    Constructor<?> events = Class.forName(HiveMetaStore.class.getName() + "$1").getDeclaredConstructor();
    events.setAccessible(true);
    server.setServerEventHandler((TServerEventHandler) events.newInstance());
    System.out.println("cryo-metastore: Hive Metastore " + org.apache.hadoop.hive.metastore.utils.MetastoreVersionInfo.getVersion()
        + " serving thrift://" + host + ":" + port);
    System.out.flush();
    server.serve();
  }

  private static void setStatic(String name, Object value) throws ReflectiveOperationException {
    Field f = HiveMetaStore.class.getDeclaredField(name);
    f.setAccessible(true);
    f.set(null, value);
  }
}
